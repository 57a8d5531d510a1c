# frozen_string_literal: true

module Ratekeeper
  VERSION = "0.1.0"
end
