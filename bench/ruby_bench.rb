# The Ruby half of the benchmark suite (bench/run runs it): ratekeeper against
# redis-rb's bare PING, and its Rack middleware against rack-attack, the same
# workload on each (N requests spread over K clients, the same four rules),
# in batches that alternate between them. Prints JSON lines {"name", "median_ns"}.
#
#   ruby bench/ruby_bench.rb REDIS_URL N
require "json"
require "redis"
require "rack"
require "rack/mock"
require "ratekeeper"

FOUR_RULES = "50/second; 1000/minute; 20000/hour; 100000/day"
FOUR = [[50, 1], [1000, 60], [20_000, 3600], [100_000, 86_400]].freeze
KEYS = 1000
BATCH = 50

def report(name, median_ns)
  puts JSON.generate({ "name" => name, "median_ns" => median_ns.round(1) })
  $stdout.flush
end

# Each call's time in batches that alternate between +calls+ (a name to a
# callable of i), so that a machine whose speed drifts during the run slows
# every one of them alike: the median over its batches of the mean time of
# one call, by name.
def paired(n, calls)
  calls.each_value { |call| (n / 10).times { |i| call.call(i) } }
  samples = calls.transform_values { [] }
  [n / BATCH, 1].max.times do |b|
    calls.each do |name, call|
      start = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
      (b * BATCH...(b + 1) * BATCH).each { |i| call.call(i) }
      samples[name] << (Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond) - start) / BATCH.to_f
    end
  end
  samples.transform_values { |s| s.sort[s.size / 2] }
end

url = ARGV.fetch(0)
n = Integer(ARGV.fetch(1))
keys = Array.new(KEYS) { |i| "user:#{i}" }
prefix = "rbbench-#{Process.pid}"

redis = Redis.new(url: url)
calls = {}
calls["redis_rb_ping"] = ->(_i) { redis.ping }

limiter = Ratekeeper::Limiter.new(FOUR_RULES, store: url, prefix: prefix)
calls["rb_check_4_rules"] = ->(i) { raise "denied" unless limiter.check(keys[i % KEYS]).allowed? }

# the floor of any check through a script: redis-rb running one that makes only
# the check's four Redis calls, with the check's keys and arguments
floor = redis.script(:load, File.read(File.join(__dir__, "script_floor.lua")))
windows = FOUR.map { |_, period| ms = period * 1000; [ms >> 32, ms & 0xffff_ffff].pack("CN") }.join
argv = ["c", "1", "", FOUR.size.to_s, windows] + FOUR.map { |limit, _| limit.to_s } +
       FOUR.map { |_, period| (period * 1000).to_s }
floor_keys = keys.map { |k| ["#{prefix}-floor:{#{k}}:l", "#{prefix}-floor:{#{k}}:p"] }
calls["redis_rb_script_floor"] = ->(i) { redis.evalsha(floor, keys: floor_keys[i % KEYS], argv: argv) }

ok = ->(_env) { [200, { "Content-Type" => "text/plain" }, ["ok"]] }
envs = Array.new(KEYS) { |i| Rack::MockRequest.env_for("/", "REMOTE_ADDR" => "10.0.#{i / 256}.#{i % 256}") }

ours = Ratekeeper::Rack::Middleware.new(ok, store: url, prefix: "#{prefix}-rack") do |rk|
  rk.throttle "req/ip", rules: FOUR_RULES
end
calls["rack_ratekeeper_4_rules"] = ->(i) { raise "denied" unless ours.call(envs[i % KEYS].dup)[0] == 200 }

# the floor of any limiter that asks Redis: the same app making one redis-rb PING a request
pinging = ->(env) { redis.ping && ok.call(env) }
calls["rack_ping_floor"] = ->(i) { raise "failed" unless pinging.call(envs[i % KEYS].dup)[0] == 200 }

# the same through the ratekeeper Redis module, on a Redis that has it loaded
if (module_url = ARGV[2])
  through = Ratekeeper::Limiter.new(FOUR_RULES, store: module_url, prefix: prefix, redis_module: "require")
  calls["rb_check_4_rules_module"] = ->(i) { raise "denied" unless through.check(keys[i % KEYS]).allowed? }
  rack = Ratekeeper::Rack::Middleware.new(ok, store: module_url, prefix: "#{prefix}-rack", redis_module: "require") do |rk|
    rk.throttle "req/ip", rules: FOUR_RULES
  end
  calls["rack_ratekeeper_4_rules_module"] = ->(i) { raise "denied" unless rack.call(envs[i % KEYS].dup)[0] == 200 }
end

require "rack/attack"
Rack::Attack.cache.store = Redis.new(url: url)
Rack::Attack.cache.prefix = "#{prefix}-attack"
FOUR.each_with_index do |(limit, period), i|
  Rack::Attack.throttle("req/ip/#{i}", limit: limit, period: period, &:ip)
end
attack = Rack::Attack.new(ok)
calls["rack_attack_4_throttles"] = ->(i) { raise "denied" unless attack.call(envs[i % KEYS].dup)[0] == 200 }

paired(n, calls).each { |name, median| report(name, median) }
