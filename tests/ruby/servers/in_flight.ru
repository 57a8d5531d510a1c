# frozen_string_literal: true

# A Rack app behind ratekeeper's middleware, limited by the policy file
# IN_FLIGHT_POLICY (a throttle "partner" of "3 concurrent" keyed by the
# query's account): /call answers after calling the slow upstream UPSTREAM,
# /stream sends 20 chunks 100 ms apart, /boom raises, /health is ok.
require "net/http"
require "ratekeeper"

# A body streamed a chunk at a time.
class Chunks
  def each
    20.times do |i|
      yield "chunk #{i}\n"
      sleep 0.1
    end
  end
end

use Ratekeeper::Rack::Middleware, policy: ENV.fetch("IN_FLIGHT_POLICY")
run lambda { |env|
  case env["PATH_INFO"]
  when "/call" then [200, { "content-type" => "text/plain" }, [Net::HTTP.get(URI(ENV.fetch("UPSTREAM")))]]
  when "/stream" then [200, { "content-type" => "text/plain" }, Chunks.new]
  when "/boom" then raise "boom"
  else [200, { "content-type" => "text/plain" }, ["ok"]]
  end
}
