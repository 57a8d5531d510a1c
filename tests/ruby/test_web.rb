# frozen_string_literal: true

require_relative "test_helper"
require "rack"
require "rack/session/cookie"
require "cgi"
require "ratekeeper/web"

# Ratekeeper::Web through Rack::MockRequest, behind Rack::Session::Cookie and
# the middleware: who may use it, the CSRF token on every change, no change
# through GET, hostile text escaped, bad input and an unreachable store as
# messages. (tests/python/test_rails_console.py drives it in Chromium in a
# Rails app under puma.)
class TestWeb < Minitest::Test
  include TestSupport

  HOSTILE = "<script>alert(1)</script>\r\n\u202e\"'&"

  # A Rack app limiting /api by client address, with the console at /ops
  # (+auth+ given the env); a MockRequest with a cookie jar.
  class Browser
    attr_reader :last

    def initialize(app)
      @request = ::Rack::MockRequest.new(app)
      @cookie = nil
    end

    def get(path, **env)
      keep(@request.get(path, env.merge("HTTP_COOKIE" => @cookie.to_s)))
    end

    def post(path, params, **env)
      keep(@request.post(path, env.merge("HTTP_COOKIE" => @cookie.to_s, params: params)))
    end

    # The session's CSRF token, from the last console page that had it.
    attr_reader :token

    private

    def keep(response)
      @cookie = response["set-cookie"][/\A[^;]+/] if response["set-cookie"]
      @token = response.body[/name="csrf" value="([^"]+)"/, 1] || @token
      @last = response
    end
  end

  def app(store: "memory://", prefix: unique_prefix, auth: ->(_env) { true }, web: nil)
    web ||= Ratekeeper::Web.new(auth: auth, actor: ->(env) { env["HTTP_X_OPERATOR"] || "ops" })
    ::Rack::Builder.new do
      use ::Rack::Session::Cookie, secret: "t" * 64
      use Ratekeeper::Rack::Middleware, store: store, prefix: prefix do |rk|
        rk.exempt("/ops")
        rk.log_level = nil
        rk.throttle("api", rules: "2/minute", paths: ["/api"]) { |request| request.client_ip }
      end
      map("/ops") { run web }
      run ->(_env) { [200, {}, ["ok"]] }
    end.to_app
  end

  # A signed-in operator's Browser on a console on the test Redis (a fresh
  # prefix), an Admin on the same store recording changes as +actor+'s, and
  # the prefix.
  def on_redis(actor: nil)
    prefix = unique_prefix
    [signed_in(Browser.new(app(store: redis_url, prefix: prefix))),
     Ratekeeper::Admin.new(store: redis_url, prefix: prefix, actor: actor), prefix]
  end

  def signed_in(browser)
    browser.get("/ops/")
    assert_equal 200, browser.last.status, browser.last.body
    browser
  end

  def test_an_unconfigured_console_and_a_refused_operator_see_nothing_and_change_nothing
    status, _, body = Ratekeeper::Web.call({})
    assert_equal 403, status
    assert_match(/Ratekeeper::Web.configure\(auth:/, body.join)
    error = assert_raises(Ratekeeper::ConfigurationError) { Ratekeeper::Web.new(auth: nil) }
    assert_match(/needs auth/, error.message)

    limiter = Ratekeeper::Limiter.new("1/s")
    refused = Browser.new(app(auth: ->(_env) { false }))
    refused.get("/ops/")
    assert_equal 403, refused.last.status
    refute_includes refused.last.body, "entries"
    refused.post("/ops/add", { "list" => "block", "target" => "user:1", "csrf" => "x" })
    assert_equal 403, refused.last.status
    assert_empty limiter.admin.entries
  end

  def test_every_change_needs_the_sessions_csrf_token_and_a_post
    browser, admin, prefix = on_redis
    forms = { "/ops/add" => { "list" => "block", "target" => "user:1" },
              "/ops/extend" => { "kind" => "blocklist", "target" => "user:1" },
              "/ops/switches" => { "shadow" => "on", "confirm" => "yes" },
              "/ops/key" => { "key" => "user:1", "action" => "tier", "value" => "pro" } }
    forms.each do |path, form|
      [nil, "", "0" * 64, "#{browser.token}x"].each do |token|
        browser.post(path, token ? form.merge("csrf" => token) : form)
        assert_equal 403, browser.last.status, "#{path} with token #{token.inspect}"
      end
      browser.get("#{path}?#{::Rack::Utils.build_query(form)}")
      refute_equal 200, browser.last.status, "GET #{path} changes nothing" unless path == "/ops/key"
    end
    assert_empty admin.entries
    assert_equal false, admin.switches[:shadow]
    assert_empty admin.history

    # another session's token is not this one's
    other = signed_in(Browser.new(app(store: redis_url, prefix: prefix)))
    browser.post("/ops/add", { "list" => "block", "target" => "user:1", "csrf" => other.token })
    assert_equal 403, browser.last.status
    assert_empty admin.entries

    # without a session there is no token to check: refused, with the reason
    no_session = Ratekeeper::Web.new(auth: ->(_env) { true }, store: redis_url, prefix: prefix)
    status, = no_session.call(::Rack::MockRequest.env_for("/", method: "POST"))
    assert_equal 500, status
  end

  def test_add_extend_remove_and_the_history_say_who_did_it
    browser, admin = on_redis
    browser.post("/ops/add", { "csrf" => browser.token, "list" => "block", "target" => "203.0.113.7",
                               "ttl" => "3600", "reason" => "scanner" }, "HTTP_X_OPERATOR" => "alice")
    assert_equal [303, "/ops/"], [browser.last.status, browser.last["location"]]
    page = browser.get("/ops/").body
    assert_includes page, "Added 203.0.113.7/32 to the blocklist for"
    assert_includes page, 'data-kind="blocklist" data-target="203.0.113.7/32"'
    assert_match(/data-seconds="35\d\d">(59m \d+s|1h 0m)</, page)

    browser.post("/ops/extend", { "csrf" => browser.token, "kind" => "blocklist", "target" => "203.0.113.7/32",
                                  "reason" => "scanner" })
    assert_includes browser.get("/ops/").body, "Extended 203.0.113.7/32 on the blocklist for 7d 0h"
    assert_operator admin.entries.first[:expires_at] - Time.now.to_f, :>, 6 * 86_400

    browser.post("/ops/remove", { "csrf" => browser.token, "kind" => "blocklist", "target" => "203.0.113.7/32" })
    assert_includes browser.get("/ops/").body, "Removed 203.0.113.7/32 from the blocklist."
    assert_empty admin.entries
    browser.post("/ops/remove", { "csrf" => browser.token, "kind" => "blocklist", "target" => "203.0.113.7/32" })
    assert_includes browser.get("/ops/").body, "was not on the blocklist (it may have expired)"

    assert_equal [["unblock", "ops", "was not listed"], ["unblock", "ops", "lifted"], ["block", "ops", "for 1w"],
                  ["block", "alice", "for 1h"]],
                 admin.history.map { |change| change.values_at(:action, :actor, :detail) }
    assert_match(%r{<td class="actor">alice</td>}, browser.last.body)
  end

  def test_bad_input_is_a_message_on_the_page
    browser, admin = on_redis
    { { "list" => "block", "target" => "10.0.0.0/99" } => "prefix length",
      { "list" => "block", "target" => "" } => "Give a target",
      { "list" => "drop", "target" => "x" } => "Choose block or safelist",
      { "list" => "block", "target" => "user:1", "ttl" => "soon" } => "invalid ttl" }.each do |form, message|
      browser.post("/ops/add", form.merge("csrf" => browser.token))
      assert_equal 400, browser.last.status, form.inspect
      assert_includes browser.last.body, message
    end
    browser.post("/ops/switches", { "csrf" => browser.token, "shadow" => "maybe" })
    assert_equal 400, browser.last.status
    browser.post("/ops/switches", { "csrf" => browser.token, "multiplier" => "0", "confirm" => "yes" })
    assert_equal 400, browser.last.status
    browser.post("/ops/key", { "csrf" => browser.token, "key" => "user:1", "action" => "override", "value" => "9/fortnight" })
    assert_equal 400, browser.last.status
    assert_includes browser.last.body, "fortnight"
    # a form Rack cannot parse: refused (its token unread), not a 500
    browser.post("/ops/add", "csrf=#{browser.token}&list=block&target=user:1&x[y]=1&x[]=2",
                 "CONTENT_TYPE" => "application/x-www-form-urlencoded")
    assert_equal 403, browser.last.status
    assert_empty admin.entries
  end

  def test_hostile_keys_and_reasons_render_inert
    browser, admin = on_redis(actor: HOSTILE)
    admin.block("user:#{HOSTILE}", reason: HOSTILE, key: true)
    admin.set_tier("user:#{HOSTILE}", "pro", reason: HOSTILE)
    [browser.get("/ops/").body, browser.get("/ops/key?#{::Rack::Utils.build_query("key" => "user:#{HOSTILE}")}").body].each do |page|
      refute_includes page, "<script>"
      refute_includes page, "\"'&<"
      assert_includes page, "&lt;script&gt;alert(1)&lt;/script&gt;"
    end
    assert_equal "text/html; charset=utf-8", browser.last["content-type"]
    assert_includes browser.last["content-security-policy"], "default-src 'none'"
  end

  def test_every_response_is_unframeable_under_the_consoles_csp
    browser, = on_redis
    refused = Browser.new(app(auth: ->(_env) { false }))
    refused.get("/ops/")
    seen = { "unconfigured" => Ratekeeper::Web.call({})[0, 2], "refused" => [refused.last.status, refused.last.headers] }
    token = browser.token
    visit = lambda do |what, method, path, form = nil|
      method == :get ? browser.get(path) : browser.post(path, { "csrf" => token }.merge(form))
      seen[what] = [browser.last.status, browser.last.headers]
    end
    visit.call("the page", :get, "/ops/")
    visit.call("nothing here", :get, "/ops/nowhere")
    visit.call("a key's card", :get, "/ops/key?key=user:5")
    visit.call("add", :post, "/ops/add", { "list" => "block", "target" => "user:5" })
    visit.call("add, bad input", :post, "/ops/add", { "list" => "nope" })
    visit.call("extend", :post, "/ops/extend", { "kind" => "blocklist", "target" => "user:5" })
    visit.call("remove", :post, "/ops/remove", { "kind" => "blocklist", "target" => "user:5" })
    visit.call("switches, to confirm", :post, "/ops/switches", { "shadow" => "on" })
    visit.call("switches, confirmed", :post, "/ops/switches", { "shadow" => "off", "confirm" => "yes" })
    visit.call("a tier set on a card", :post, "/ops/key", { "key" => "user:5", "action" => "tier", "value" => "pro" })
    visit.call("no CSRF token", :post, "/ops/add", { "csrf" => "x" })
    assert_equal({ "unconfigured" => 403, "refused" => 403, "the page" => 200, "nothing here" => 404, "a key's card" => 200, "add" => 303,
                   "add, bad input" => 400, "extend" => 303, "remove" => 303, "switches, to confirm" => 200,
                   "switches, confirmed" => 303, "a tier set on a card" => 303, "no CSRF token" => 403 },
                 seen.transform_values(&:first))
    guard = { "x-frame-options" => "DENY", "content-security-policy" => Ratekeeper::CONSOLE_CSP }
    unguarded = seen.transform_values { |(_, headers)| guard.keys.to_h { |name| [name, headers[name]] } }
                    .reject { |_, headers| headers == guard }
    assert_empty unguarded
  end

  def test_switches_need_a_confirmation_and_a_keys_card_sets_its_tier
    browser, admin = on_redis
    browser.post("/ops/switches", { "csrf" => browser.token, "shadow" => "on", "multiplier" => "2", "reason" => "drill" })
    assert_equal 200, browser.last.status
    assert_includes browser.last.body, 'id="confirm-button"'
    assert_equal({ enabled: true, shadow: false, multiplier: 1.0 }, admin.switches)
    browser.post("/ops/switches", { "csrf" => browser.token, "shadow" => "on", "multiplier" => "2", "reason" => "drill",
                                    "confirm" => "yes" })
    assert_equal({ enabled: true, shadow: true, multiplier: 2.0 }, admin.switches)
    assert_equal "drill", admin.history(limit: 1).first[:reason]
    admin.set_switches(shadow: false, multiplier: 1)

    2.times { browser.get("/api/x", "REMOTE_ADDR" => "203.0.113.40") }
    card = browser.get("/ops/key?key=203.0.113.40").body
    assert_match(%r{<tr class="usage" data-scope="api"><td>api</td><td>2/60s</td><td class="used">2</td><td>0</td>}, card)
    browser.post("/ops/key", { "csrf" => browser.token, "key" => "203.0.113.40", "action" => "override",
                               "value" => "9/minute", "reason" => "partner" })
    assert_equal "/ops/key?key=203.0.113.40", browser.last["location"]
    assert_includes browser.get("/ops/key?key=203.0.113.40").body, '<td id="override">9/1m</td>'
    browser.post("/ops/key", { "csrf" => browser.token, "key" => "203.0.113.40", "action" => "override", "value" => "" })
    assert_nil admin.inspect_key("203.0.113.40")[:override]
    assert_includes browser.get("/ops/key?key=203.0.113.40").body, "Cleared 203.0.113.40&#39;s override."
  end

  # A job's limiter holds slots in the scope "export": the card shows them
  # when asked for that scope, and an operator releases one (recorded).
  def test_a_keys_card_shows_its_leases_and_releases_one
    browser, admin, prefix = on_redis
    export = Ratekeeper::Limiter.new("2 concurrent", store: redis_url, prefix: prefix, scope: "export")
    stuck = export.hold("job:7")
    assert_includes browser.get("/ops/key?key=job:7").body, "No lease is held."
    card = browser.get("/ops/key?key=job:7&scope=export").body
    assert_includes card, %(<td class="lease-id">#{stuck.id}</td>)
    browser.post("/ops/key", { "csrf" => browser.token, "key" => "job:7", "action" => "release_lease",
                               "lease_id" => stuck.id, "scope" => "export", "reason" => "hung" })
    assert_equal "/ops/key?key=job%3A7&scope=export", browser.last["location"]
    assert_includes browser.get(browser.last["location"]).body, "Released lease #{stuck.id} of job:7."
    assert_empty export.leases("job:7")
    change = admin.history(limit: 1).first
    assert_equal ["release", "job:7", "export", stuck.id, "hung", "ops"],
                 change.values_at(:action, :target, :scope, :detail, :reason, :actor)
    browser.post("/ops/key", { "csrf" => browser.token, "key" => "job:7", "action" => "release_lease",
                               "lease_id" => stuck.id, "scope" => "export" })
    assert_equal 400, browser.last.status
    assert_includes browser.last.body, "holds no lease"
  end

  def test_the_memory_store_is_the_middlewares_and_a_url_cannot_name_one
    browser = signed_in(Browser.new(app))
    3.times { browser.get("/api/x", "REMOTE_ADDR" => "198.51.100.9") }
    browser.post("/ops/add", { "csrf" => browser.token, "list" => "block", "target" => "198.51.100.9" })
    assert_equal 303, browser.last.status
    assert_equal 403, browser.get("/api/x", "REMOTE_ADDR" => "198.51.100.9").status
    error = assert_raises(Ratekeeper::ConfigurationError) do
      Ratekeeper::Web.new(auth: ->(_env) { true }, store: "memory://")
    end
    assert_match(/memory:/, error.message)
    assert_raises(Ratekeeper::ConfigurationError) do
      Ratekeeper::Web.new(auth: ->(_env) { true }, store: "memory://", gate: Ratekeeper::Gate.new({}))
    end
    # no middleware in front and no store: said, not a crash
    status, _, body = Ratekeeper::Web.new(auth: ->(_env) { true }).call(::Rack::MockRequest.env_for("/", "rack.session" => {}))
    assert_equal 500, status
    assert_match(/found no store/, body.join)
  end

  def test_an_unreachable_store_is_a_message_not_a_crash
    gate = Ratekeeper::Gate.new({ "store" => { "url" => "redis://127.0.0.1:1/0", "timeout" => 0.2,
                                               "connect_timeout" => 0.2 } })
    web = Ratekeeper::Web.new(auth: ->(_env) { true }, gate: gate)
    browser = Browser.new(::Rack::Builder.new do
      use ::Rack::Session::Cookie, secret: "t" * 64
      run web
    end.to_app)
    browser.get("/")
    assert_equal 503, browser.last.status
    assert_includes browser.last.body, "The store could not be read"
    browser.post("/add", { "csrf" => browser.token, "list" => "block", "target" => "user:1" })
    assert_equal 503, browser.last.status
    assert_includes browser.last.body, "The store could not be reached"
  end

  # Keys the record of denials cannot show as themselves: over 128 bytes and
  # holding braces (kept as # and their SHA-1), and bytes that are not UTF-8.
  STORED_ONLY = ["k" * 200, "user:{42}", "tok\xFF\xFE".b].freeze

  # The hidden fields of each +form_class+ form in the table +table+ of a page.
  def forms_in(page, table, form_class)
    rows = page[%r{<table[^>]* id="#{table}">(.*?)</table>}m, 1]
    assert rows, "no table #{table}"
    rows.scan(%r{<form class="#{form_class}"[^>]*>(.*?)</form>}m).map do |(form)|
      form.scan(/<input type="hidden" name="(\w+)" value="([^"]*)">/).to_h { |name, value| [name, CGI.unescapeHTML(value)] }
    end
  end

  def test_a_denied_key_hashed_or_not_utf8_is_blocked_inspected_and_removed_from_its_row
    web = Ratekeeper::Web.new(auth: ->(_env) { true })
    browser = signed_in(Browser.new(::Rack::Builder.new do
      use ::Rack::Session::Cookie, secret: "t" * 64
      use Ratekeeper::Rack::Middleware, store: "memory://", prefix: "stored-only", controls_refresh: 0.1 do |rk|
        rk.exempt("/ops")
        rk.log_level = nil
        rk.throttle("keys", rules: "2/minute", paths: ["/keyed"]) { |request| request.get_header("HTTP_X_KEY") }
      end
      map("/ops") { run web }
      run ->(_env) { [200, {}, ["ok"]] }
    end.to_app))
    answers = lambda do
      STORED_ONLY.each_with_index.map { |key, i| browser.get("/keyed", "HTTP_X_KEY" => key, "REMOTE_ADDR" => "198.51.100.#{i}").status }
    end
    3.times { answers.call }
    assert_equal [429] * 3, answers.call

    # (the process's record reaches the store within its policy refresh)
    deadline = Time.now + 5
    blocks = []
    while blocks.size < 3 && Time.now < deadline
      page = browser.get("/ops/").body
      blocks = forms_in(page, "denied-key", "act").select { |form| form["list"] == "block" }
    end
    assert_equal 3, blocks.size, page
    assert_includes page, "tok\u{fffd}\u{fffd}", "the key not UTF-8 is shown as text"
    blocks.each_with_index do |form, i|
      browser.post("/ops/add", form.merge("csrf" => browser.token))
      assert_equal 303, browser.last.status, browser.last.body
      assert_equal [403] * (i + 1) + [429] * (2 - i), answers.call.sort, form
    end

    links = page.scan(%r{<a class="inspect" href="([^"]+)">Inspect</a>}).flatten
    assert_equal 3, links.size
    links.each do |link|
      card = browser.get(CGI.unescapeHTML(link))
      assert_equal 200, card.status
      assert_match(%r{<td id="blocklist">until [^<]+</td>}, card.body)
    end

    removes = forms_in(browser.get("/ops/").body, "entries", "remove").reject { |form| form.key?("reason") }
    assert_equal 3, removes.size
    removes.each do |form|
      browser.post("/ops/remove", form.merge("csrf" => browser.token))
      assert_equal 303, browser.last.status
      assert_includes browser.get("/ops/").body, "Removed "
    end
    assert_equal [429] * 3, answers.call
  end
end
