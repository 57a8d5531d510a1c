# frozen_string_literal: true

require_relative "test_helper"
require "net/http"
require "rack/mock"
require "redis"
require "active_support"
require "active_support/notifications"
require "active_support/cache"
require "active_support/core_ext/integer/time"
require "ratekeeper/rack_attack"
require "timecop"

# ratekeeper/rack_attack as an app that removed the rack-attack gem uses it:
# each feature rack-attack's README documents, through Rack::MockRequest on
# Redis (the cache store a Redis client, a RedisCacheStore or a MemoryStore),
# and a Rails 6.1 app with seed 001's kind of initializer under puma with 2
# workers (tests/ruby/servers/rails_attack).
class TestRackAttack < Minitest::Test
  include TestSupport

  HELLO = ->(_env) { [200, { "content-type" => "text/plain" }, ["ok"]] }

  def setup
    Rack::Attack.clear_configuration
    Rack::Attack.enabled = true
    Rack::Attack.throttled_response_retry_after_header = false
    Rack::Attack.throttled_responder = Rack::Attack.default_throttled_responder
    Rack::Attack.cache.store = Redis.new(url: redis_url)
    Rack::Attack.cache.prefix = unique_prefix
    @app = Rack::MockRequest.new(Rack::Attack.new(HELLO))
  end

  # Rack::Attack is process-wide, and its Railtie adds it to every Rails app
  # this process initializes (test_rails.rb's): no test leaves a throttle behind
  def teardown
    Rack::Attack.clear_configuration
    # (rack-attack's store is global: a test's refused store must not reach
    # the Rails apps of tests run after it, whose middleware rack-attack's
    # Railtie includes)
    Rack::Attack.cache.store = Redis.new(url: redis_url)
  end

  def get(path = "/", ip: "198.51.100.7", **env)
    @app.get(path, "REMOTE_ADDR" => ip, **env)
  end

  def test_throttles_count_exactly_and_answer_as_rack_attack_does
    Rack::Attack.throttle("req/ip", limit: 3, period: 60) { |req| req.ip }
    Rack::Attack.throttle("per-path", limit: 10, period: 60) { |req| req.path }
    assert_equal [200, 200, 200, 429], Array.new(4) { get.status }
    denied = get
    assert_equal ["text/plain", "Retry later\n"], [denied.headers["content-type"], denied.body]
    assert_nil denied.headers["retry-after"]
    Rack::Attack.throttled_response_retry_after_header = true
    assert_operator get.headers["retry-after"].to_i, :>=, 1
    assert_equal 200, get(ip: "198.51.100.8").status, "another discriminator has its own quota"
    env = Rack::MockRequest.env_for("/", "REMOTE_ADDR" => "198.51.100.7")
    Rack::Attack.new(HELLO).call(env)
    assert_equal "req/ip", env["rack.attack.matched"]
    assert_equal :throttle, env["rack.attack.match_type"]
    assert_equal "198.51.100.7", env["rack.attack.match_discriminator"]
    data = env["rack.attack.match_data"]
    assert_equal [3, 60.0, 4], [data[:limit], data[:period], data[:count]]
    assert_includes env["rack.attack.throttle_data"].keys, "per-path"
  end

  def test_timecop_moves_the_windows_as_it_moves_rack_attacks
    Rack::Attack.throttled_response_retry_after_header = true
    Rack::Attack.throttle("by ip", limit: 1, period: 60) { |req| req.ip }
    Rack::Attack.blocklist("f2b") do |req|
      Rack::Attack::Fail2Ban.filter(req.ip, maxretry: 1, findtime: 60, bantime: 60) { req.path == "/bad" }
    end
    Timecop.freeze(Time.at(0)) { assert_equal 200, get.status }
    Timecop.freeze(Time.at(25)) { assert_equal "35", get.headers["retry-after"], "the epoch itself can be frozen at" }
    Timecop.freeze(Time.at(60)) { assert_equal 200, get.status, "the unit counted at 0 left the window" }
    Timecop.freeze(Time.at(100)) { assert_equal [403, 403], [get("/bad").status, get.status] }
    Timecop.freeze(Time.at(161)) { assert_equal 200, get.status, "the ban ended" }
    assert_equal 200, get(ip: "198.51.100.99").status, "the real clock once Timecop returns"
  ensure
    Timecop.return
    Ratekeeper::Testing.unfreeze
  end

  def test_a_nil_discriminator_is_not_counted_and_procs_give_the_rate
    Rack::Attack.throttle("api", limit: ->(req) { req.get_header("HTTP_X_PLAN") == "pro" ? 3 : 1 },
                                 period: ->(_req) { 60 }) { |req| req.get_header("HTTP_X_KEY") }
    assert_equal [200, 200], Array.new(2) { get.status }, "no key: not counted"
    assert_equal [200, 429], Array.new(2) { get("/", "HTTP_X_KEY" => "free").status }
    assert_equal [200, 200, 200, 429], Array.new(4) { get("/", "HTTP_X_KEY" => "k", "HTTP_X_PLAN" => "pro").status }
  end

  def test_safelists_and_blocklists
    Rack::Attack.throttle("req/ip", limit: 1, period: 60) { |req| req.ip }
    Rack::Attack.safelist("localhost") { |req| req.ip == "127.0.0.1" }
    Rack::Attack.blocklist("php") { |req| req.path.end_with?(".php") }
    Rack::Attack.blocklist_ip("203.0.113.0/24")
    Rack::Attack.safelist_ip("2001:db8::/32")
    assert_equal [200, 200, 200], Array.new(3) { get(ip: "127.0.0.1").status }
    assert_equal [200, 200], Array.new(2) { get(ip: "2001:db8::5").status }
    blocked = get("/x.php", ip: "198.51.100.9")
    assert_equal [403, "Forbidden\n"], [blocked.status, blocked.body]
    assert_equal 403, get(ip: "203.0.113.77").status
    Rack::Attack.blocklisted_responder = ->(request) { [503, {}, ["no #{request.path}"]] }
    assert_equal [503, "no /y.php"], get("/y.php").then { |r| [r.status, r.body] }
  ensure
    Rack::Attack.blocklisted_responder = ->(_request) { [403, { "content-type" => "text/plain" }, ["Forbidden\n"]] }
  end

  def test_fail2ban_and_allow2ban_filters
    Rack::Attack.blocklist("fail2ban") do |req| # times as an initializer gives them: Durations
      Rack::Attack::Fail2Ban.filter("f-#{req.ip}", maxretry: 2, findtime: 1.minute, bantime: 1.minute) { req.path == "/bad" }
    end
    Rack::Attack.blocklist("allow2ban") do |req|
      Rack::Attack::Allow2Ban.filter("a-#{req.ip}", maxretry: 2, findtime: 60, bantime: 60) { req.path == "/login" }
    end
    assert_equal [200, 403, 200, 403, 403], [get.status, get("/bad").status, get.status, get("/bad").status, get.status],
                 "each bad request is refused; two ban the client"
    other = "198.51.100.20"
    assert_equal [200, 200, 403, 403], [get("/login", ip: other).status, get("/login", ip: other).status,
                                        get("/login", ip: other).status, get("/", ip: other).status],
                 "allow2ban lets requests through until the ban"
  end

  def test_tracks_notifications_and_a_request_extension
    Rack::Attack::Request.class_eval { define_method(:from_office?) { ip == "198.51.100.50" } }
    Rack::Attack.track("office") { |req| req.from_office? }
    Rack::Attack.track("busy", limit: 2, period: 60) { |req| req.ip }
    Rack::Attack.throttle("req/ip", limit: 1, period: 60) { |req| req.ip }
    events = []
    subscriber = ActiveSupport::Notifications.subscribe(/rack_attack/) do |name, _s, _f, _id, payload|
      events << [name, payload[:request].class]
    end
    get(ip: "198.51.100.50")
    get(ip: "198.51.100.50")
    assert_equal [["track.rack_attack", Rack::Attack::Request], ["throttle.rack_attack", Rack::Attack::Request]], events
  ensure
    ActiveSupport::Notifications.unsubscribe(subscriber) if subscriber
  end

  def test_enabled_reset_and_clear_configuration
    Rack::Attack.throttle("req/ip", limit: 1, period: 60) { |req| req.ip }
    assert_equal [200, 429], [get.status, get.status]
    Rack::Attack.enabled = false
    assert_equal 200, get.status
    Rack::Attack.enabled = true
    Rack::Attack.reset!
    assert_equal [200, 429], [get.status, get.status], "reset! forgot the counts"
    Rack::Attack.clear_configuration
    assert_equal 200, get.status
  end

  # As rack-attack's counts are entries of the cache store, an app's test
  # setup that clears the store, or calls reset!, starts from nothing:
  # counts, strikes and bans
  def test_clearing_the_cache_store_or_reset_forgets_the_counts
    Rack::Attack.throttle("req/ip", limit: 1, period: 60) { |req| req.ip }
    Rack::Attack.blocklist("f2b") do |req|
      Rack::Attack::Fail2Ban.filter(req.ip, maxretry: 1, findtime: 60, bantime: 60) { req.path == "/bad" }
    end
    other = ActiveSupport::Cache::MemoryStore.new
    Rack::Attack.cache.store = ActiveSupport::Cache::MemoryStore.new
    assert_equal [200, 429], [get.status, get.status]
    assert_equal [403, 403], [get("/bad", ip: "198.51.100.8").status, get(ip: "198.51.100.8").status]
    other.clear
    assert_equal 429, get.status, "another store's clear is not this one's"
    Rack::Attack.cache.store.clear
    assert_equal [200, 429], [get.status, get.status], "MemoryStore#clear forgot the counts"
    assert_equal 200, get(ip: "198.51.100.8").status, "and the ban"
    Rack::Attack.reset!
    assert_equal [200, 429], [get.status, get.status], "reset! forgot them"
    # a RedisCacheStore's clear empties its database (one no other test uses)
    Rack::Attack.cache.store = ActiveSupport::Cache::RedisCacheStore.new(url: redis_url.sub(%r{/\d+\z}, "/11"))
    assert_equal [200, 429], [get.status, get.status]
    Rack::Attack.cache.store.clear
    assert_equal [200, 429], [get.status, get.status], "RedisCacheStore#clear forgot the counts"
    Rack::Attack.reset!
    assert_equal [200, 429], [get.status, get.status], "reset! forgot them"
  end

  def test_cache_stores
    memory = ActiveSupport::Cache::MemoryStore.new
    Rack::Attack.cache.store = memory
    assert_equal "memory://", Rack::Attack.cache.url
    Rack::Attack.cache.store = ActiveSupport::Cache::RedisCacheStore.new(url: redis_url)
    assert_equal redis_url, Rack::Attack.cache.url
    Rack::Attack.throttle("req/ip", limit: 1, period: 60) { |req| req.ip }
    assert_equal [200, 429], [get.status, get.status]
    # a store it cannot use: warned of as rack-attack warns, refused by the first request
    assert_output("", "[rack-attack] Configured store Object doesn't respond to #read, #write, #delete, #increment\n") do
      Rack::Attack.cache.store = Object.new
    end
    error = assert_raises(Rack::Attack::MisconfiguredStoreError) { get }
    assert_match(/Object cannot hold exact windows/, error.message)
    counter = Class.new { %i[read write delete increment].each { |m| define_method(m) { |*| nil } } }
    assert_output("", /\A\[ratekeeper\] .*#<Class:0x\h+> cannot hold exact windows/) { Rack::Attack.cache.store = counter.new }
    assert_raises(Rack::Attack::MisconfiguredStoreError) { get }
    Rack::Attack.cache.store = ActiveSupport::Cache::RedisCacheStore.new(url: redis_url)
    assert_equal 200, get("/", ip: "198.51.100.8").status, "a usable store again"
  end

  # As in rack-attack, a store it cannot use fails only the rules that count
  # in it: with none, requests are answered (the lists still hold)
  def test_a_store_it_cannot_use_fails_only_the_rules_that_count
    assert_output("", /doesn't respond to/) { Rack::Attack.cache.store = Object.new }
    Rack::Attack.blocklist_ip("203.0.113.9")
    Rack::Attack.track("seen") { |req| req.ip }
    assert_equal [200, 403], [get.status, get(ip: "203.0.113.9").status]
    Rack::Attack.throttle("req/ip", limit: 1, period: 60) { |req| req.ip }
    assert_raises(Rack::Attack::MisconfiguredStoreError) { get }
    Rack::Attack.clear_configuration
    Rack::Attack.blocklist("pentest") do |req|
      Rack::Attack::Fail2Ban.filter("pentest-#{req.ip}", maxretry: 2, findtime: 60, bantime: 60) { true }
    end
    assert_raises(Rack::Attack::MisconfiguredStoreError) { get }
  end

  # A client's ACL user, password, TLS and CA reach the ratekeeper store's
  # URL (the clients connect lazily: nothing is dialled here)
  def test_a_redis_clients_credentials_and_tls_reach_the_store_url
    client = Redis.new(host: "127.0.0.1", port: 6390, db: 2, username: "app", password: "p@ss/w:rd", ssl: true,
                       ssl_params: { ca_file: "/nonexistent/ca.pem", verify_mode: OpenSSL::SSL::VERIFY_PEER })
    url = Rack::Attack::Cache.url_of(client)
    assert_equal "rediss://app:p%40ss%2Fw%3Ard@127.0.0.1:6390/2?ssl_ca_certs=%2Fnonexistent%2Fca.pem", url
    # the core reads the CA file the client named (and never shows the password)
    error = assert_raises(Ratekeeper::ConfigurationError) { Ratekeeper::Limiter.new("1/second", store: url) }
    assert_match(%r{/nonexistent/ca.pem}, error.message)
    refute_match(/p%40ss|p@ss/, error.message)
    given = ActiveSupport::Cache::RedisCacheStore.new(url: "rediss://127.0.0.1:6390/0",
                                                      ssl_params: { verify_mode: OpenSSL::SSL::VERIFY_NONE })
    assert_equal "rediss://127.0.0.1:6390/0?ssl_cert_reqs=none", Rack::Attack::Cache.url_of(given)
    with_cert = Redis.new(ssl: true, ssl_params: { cert: Object.new })
    assert_output("", /ssl_certfile/) { Rack::Attack.cache.store = with_cert }
    Rack::Attack.throttle("req/ip", limit: 1, period: 60) { |req| req.ip }
    error = assert_raises(Rack::Attack::MisconfiguredStoreError) { get }
    assert_match(/ssl_certfile/, error.message)
  end

  def test_hostile_discriminators_are_limited_each_exactly
    Rack::Attack.throttle("key", limit: 2, period: 60) { |req| req.get_header("HTTP_X_KEY") }
    ["caf\xC3\xA9\xFF".b, "a\x00b", "a\r\nSet-Cookie: x=1", "a\r\nSet-Cookie: x=2"].each do |value|
      assert_equal [200, 200, 429], Array.new(3) { get("/", "HTTP_X_KEY" => value).status }, value.inspect
    end
  end

  def test_seed_001_initializer_under_puma_with_two_workers
    port = free_port
    env = { "RATEKEEPER_STORE" => redis_url, "RATEKEEPER_PREFIX" => unique_prefix }
    env["RUBYLIB"] = File.join(ROOT, "ruby/lib") if ENV["RATEKEEPER_DEV"] == "1"
    log = File.join(Dir.tmpdir, "puma-rack-attack-#{port}.log")
    pid = spawn(env, "puma", "-w", "2", "-b", "tcp://127.0.0.1:#{port}",
                File.join(ROOT, "tests/ruby/servers/rails_attack/config.ru"), out: log, err: log)
    wait_up(port, pid, log)
    http = lambda do |path, form = nil|
      uri = URI("http://127.0.0.1:#{port}#{path}")
      response = form ? Net::HTTP.post_form(uri, form) : Net::HTTP.get_response(uri)
      [response.code.to_i, JSON.parse(response.body)]
    end
    # both workers up before anything is counted (/assets is not throttled):
    # the port answers as soon as the first has booted Rails
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 30
    seen = []
    while seen.uniq.size < 2 && Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
      seen << http.call("/assets/warm")[1]["pid"]
    end
    assert_equal 2, seen.uniq.size, "the second worker never answered: #{File.read(log)}"
    logins = Array.new(7) { http.call("/login", "email" => "Alice@Example.com ") }
    assert_equal [200] * 5 + [429] * 2, logins.map(&:first), File.read(log)
    assert_equal({ "error" => "throttled", "throttle" => "logins/email", "limit" => 5 }, logins.last[1].except("pid"))
    pages = Array.new(15) { http.call("/page") }
    assert_equal [200] * 13 + [429] * 2, pages.map(&:first), "20 per minute per IP across both workers, logins counted"
    assert_equal 2, (logins + pages).map { |_, body| body["pid"] }.uniq.size, "both workers answered"
    # the fail2ban blocklist: two probes ban the client for 10 minutes, on
    # both workers, before any throttle is asked (rack-attack's order)
    status = ->(path) { Net::HTTP.get_response(URI("http://127.0.0.1:#{port}#{path}")).code.to_i }
    assert_equal [403, 403], [status.call("/wp-admin/setup.php"), status.call("/files/etc/passwd")]
    assert_equal [403] * 6, Array.new(6) { status.call("/page") }, "banned, not throttled, on either worker"
  ensure
    stop_server(pid)
  end

  def test_the_railtie_inserts_the_middleware_as_rack_attacks_does
    rails = %(require "rails"\nrequire "action_controller/railtie"\n)
    compat = %(require "active_support"\nrequire "ratekeeper/rack_attack"\n)
    # Rails loaded first (an app's initializer), or after (a spec helper's order)
    [rails + compat, compat + rails].each do |loads|
      script = <<~RUBY
        #{loads}
        class App < Rails::Application
          config.eager_load = false
          config.logger = Logger.new(nil)
          config.secret_key_base = "x" * 32
        end
        App.initialize!
        print App.middleware.count { |m| m.klass == Rack::Attack }
      RUBY
      env = ENV["RATEKEEPER_DEV"] == "1" ? { "RUBYLIB" => File.join(ROOT, "ruby/lib") } : {}
      out = IO.popen(env, ["timeout", "120", RbConfig.ruby, "-e", script], err: %i[child out], &:read)
      assert_equal "1", out.lines.last.to_s.strip, "#{loads}: #{out}"
    end
  end

  private

  def wait_up(port, pid, log)
    200.times do
      flunk "puma exited: #{File.read(log)}" if Process.waitpid(pid, Process::WNOHANG)
      Net::HTTP.start("127.0.0.1", port, open_timeout: 1, read_timeout: 2) { |h| h.get("/assets/warm") }
      return
    rescue Errno::ECONNREFUSED, EOFError, Errno::ECONNRESET, Net::OpenTimeout, Net::ReadTimeout
      sleep 0.1
    end
    flunk "puma did not start on port #{port}"
  end
end
