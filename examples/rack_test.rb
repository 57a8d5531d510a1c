# frozen_string_literal: true

# The tests of examples/config.ru's limits, with ratekeeper's Minitest helper
# (memory stores emptied, the clock and the switch restored, around each
# test): ruby examples/rack_test.rb
require "minitest/autorun"
require "rack"
require "rack/mock"
require "ratekeeper/testing"

class RackLimitsTest < Minitest::Test
  include Ratekeeper::Testing::Minitest

  APP = Rack::Builder.parse_file(File.expand_path("config.ru", __dir__)).then { |app| app.is_a?(Array) ? app.first : app }

  def get(path, ip: "203.0.113.1")
    Rack::MockRequest.new(APP).get(path, "REMOTE_ADDR" => ip)
  end

  def test_the_sixth_request_in_a_second_is_refused
    assert_equal [200] * 5 + [429], Array.new(6) { get("/").status }
  end

  def test_the_limit_lifts_when_the_clock_moves_on
    clock = Ratekeeper::Testing.freeze_time
    assert_equal [200] * 5 + [429], Array.new(6) { get("/").status }
    clock.advance(1)
    assert_equal 200, get("/").status
  end

  def test_nothing_is_limited_when_switched_off
    Ratekeeper.disable do
      assert_equal [200], Array.new(20) { get("/").status }.uniq
    end
    assert_equal 200, get("/").status, "limiting is back, with a fresh count"
  end
end
