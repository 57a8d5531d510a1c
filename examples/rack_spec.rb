# frozen_string_literal: true

# The tests of examples/config.ru's limits under RSpec, with ratekeeper's
# RSpec helper (memory stores emptied, the clock and the switch restored,
# around each example): rspec examples/rack_spec.rb
require "rack"
require "rack/mock"
require "ratekeeper/testing"

RSpec.configure { |config| config.include Ratekeeper::Testing::RSpec }

RSpec.describe "the limits of examples/config.ru" do
  app = Rack::Builder.parse_file(File.expand_path("config.ru", __dir__)).then { |a| a.is_a?(Array) ? a.first : a }

  def get(app, path, ip: "203.0.113.1")
    Rack::MockRequest.new(app).get(path, "REMOTE_ADDR" => ip)
  end

  it "refuses the sixth request in a second" do
    expect(Array.new(6) { get(app, "/").status }).to eq([200] * 5 + [429])
  end

  it "lifts the limit when the clock moves on" do
    clock = Ratekeeper::Testing.freeze_time
    expect(Array.new(6) { get(app, "/").status }).to eq([200] * 5 + [429])
    clock.advance(1)
    expect(get(app, "/").status).to eq(200)
  end

  it "limits nothing when switched off" do
    Ratekeeper.disable do
      expect(Array.new(20) { get(app, "/").status }.uniq).to eq([200])
    end
    expect(get(app, "/").status).to eq(200)
  end
end
