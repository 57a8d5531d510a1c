# frozen_string_literal: true

# puma -C puma_workers.rb: two workers, each loading the app after the fork.
workers 2
threads 4, 4
