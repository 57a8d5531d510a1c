# frozen_string_literal: true

require_relative "test_helper"
require "json"
require "tmpdir"
require "rack/mock"

# The gate's conformance table (tests/cases/gate.json, under the policy
# tests/cases/gate.toml) through the Rack middleware given the policy file,
# on memory, Redis and Redis Cluster: every request of the table gets the
# answer the table gives, as through the Python doors and the edge server
# (tests/python/test_gate_table.py).
class TestGateTable < Minitest::Test
  include TestSupport

  CASES = File.expand_path("../cases", __dir__)
  TABLE = JSON.parse(File.read(File.join(CASES, "gate.json")))
  POLICY = File.read(File.join(CASES, "gate.toml"))
  PEER = "198.51.100.7"
  HELLO = ->(_env) { [200, { "content-type" => "text/plain" }, ["ok"]] }

  def test_every_case_on_every_store
    stores = { "memory" => "memory://", "redis" => redis_url, "cluster" => configured("RATEKEEPER_TEST_CLUSTER") }
    Dir.mktmpdir do |dir|
      stores.each do |store, url|
        TABLE["cases"].each_key { |name| run_case(dir, store, url, name) }
      end
    end
  end

  private

  def run_case(dir, store, url, name)
    path = File.join(dir, "#{unique_prefix}.toml")
    text = POLICY.sub(%([store]\nurl = "memory://"), %([store]\nurl = "#{url}"\nprefix = "#{unique_prefix}"))
    refute_equal POLICY, text
    File.write(path, text)
    app = Ratekeeper::Rack::Middleware.new(HELLO, policy: path)
    TABLE["cases"][name].each_with_index do |step, i|
      where = "rack on #{store}: #{name.inspect}, request #{i}"
      status, headers, body = app.call(env_for(step))
      text = body.each.to_a.join
      assert_equal step["status"], status, "#{where}: #{text}"
      assert_equal step["error"], JSON.parse(text)["error"], where if step["error"]
      expect(where, headers, step.fetch("expect", {}))
    end
  end

  def env_for(step)
    query = step["query"] ? "?#{step["query"]}" : ""
    headers = step.fetch("headers", {}).to_h { |k, v| ["HTTP_#{k.upcase.tr("-", "_")}", v] }
    Rack::MockRequest.env_for("http://example.com#{step["path"]}#{query}",
                              method: step["method"], "REMOTE_ADDR" => step.fetch("peer", PEER), **headers)
  end

  def expect(where, headers, wanted)
    lower = headers.to_h { |k, v| [k.downcase, v] }
    wanted.each do |name, want|
      got = lower[name.downcase]
      case want
      when nil then assert_nil got, "#{where}: #{name}"
      when "*" then refute_nil got, "#{where}: #{name} is missing"
      else assert_equal want, got, "#{where}: #{name}"
      end
    end
  end
end
