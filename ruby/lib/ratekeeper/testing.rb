# frozen_string_literal: true

require "ratekeeper"

module Ratekeeper
  # Runs the block with every check admitted without asking a store (in
  # this process; Admin's switch reaches every process), then limits again.
  def self.disable
    _testing_disable(true)
    yield
  ensure
    _testing_disable(false)
  end

  # Helpers for testing an application that uses ratekeeper:
  #
  #   require "ratekeeper/testing"
  #
  #   class LoginTest < Minitest::Test
  #     include Ratekeeper::Testing::Minitest   # memory stores emptied, clock and switch restored, per test
  #
  #     def test_login_is_limited
  #       clock = Ratekeeper::Testing.freeze_time
  #       5.times { post "/login", email: "a@b.c" }
  #       assert_equal 429, post("/login", email: "a@b.c").status
  #       clock.advance(300)
  #       refute_equal 429, post("/login", email: "a@b.c").status
  #     end
  #   end
  #
  # RSpec: `config.include Ratekeeper::Testing::RSpec` (the same, around each example).
  module Testing
    # The frozen clock of checks (process-wide: every limiter and middleware).
    class Clock
      attr_reader :now

      def initialize(now)
        set(now)
      end

      # Freezes the clock at +now+ (seconds since the epoch).
      def set(now)
        @now = now.to_f
        Ratekeeper._testing_freeze(@now)
      end

      # Moves the clock +seconds+ on.
      def advance(seconds)
        set(@now + seconds)
      end
    end

    START = 1_700_000_000.0

    class << self
      # Freezes the clock of every check that gives no now: returns the
      # Clock; with a block, runs it and unfreezes.
      def freeze_time(now = START)
        clock = Clock.new(now)
        return clock unless block_given?

        begin
          yield clock
        ensure
          unfreeze
        end
      end

      # The real clock again.
      def unfreeze
        Ratekeeper._testing_freeze(nil)
      end

      # Empties every memory store of this process (at its next use).
      def reset!
        Ratekeeper._testing_reset
      end

      # What each test starts and ends with: empty memory stores, the real
      # clock, limiting switched on.
      def clean!
        reset!
        unfreeze
        Ratekeeper._testing_disable(false)
      end
    end

    # Include in a Minitest::Test: each test starts and ends clean.
    module Minitest
      def before_setup
        Ratekeeper::Testing.clean!
        super
      end

      def after_teardown
        super
        Ratekeeper::Testing.clean!
      end
    end

    # Include in RSpec (`config.include Ratekeeper::Testing::RSpec`): each example starts and ends clean.
    module RSpec
      def self.included(group)
        return unless group.respond_to?(:around)

        group.around do |example|
          Ratekeeper::Testing.clean!
          example.run
        ensure
          Ratekeeper::Testing.clean!
        end
      end
    end
  end
end
