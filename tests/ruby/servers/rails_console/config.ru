# frozen_string_literal: true

# The Rails app (tests/ruby/servers/rails_console) under puma, as `rails new` writes config.ru.
require_relative "config/environment"

run Rails.application
