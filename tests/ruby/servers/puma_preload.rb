# frozen_string_literal: true

# puma -C puma_preload.rb: two workers, the app (and its limiter) loaded in the master before the fork.
workers 2
threads 4, 4
preload_app!
