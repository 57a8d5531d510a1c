# frozen_string_literal: true

require "erb"
require "rack"
require "securerandom"
require "time"
require "ratekeeper"

module Ratekeeper
  # The operations console as a Rack app, the Django page's twin: who is
  # limited now (the most denied networks, addresses and keys over the last
  # 5 or 60 minutes, a chart of the denials per minute, each row one click
  # from a block or a safelist, a key's also from its card: a key's row acts
  # on the very key, hashed or not UTF-8), the blocks and safelists (add, extend a
  # week, remove), the switches (changed after a confirmation), a key's card
  # (its usage per rule in each throttle's scope, its listings and bans,
  # its tier and override, set or cleared) and the history of changes, each
  # recorded as the signed-in operator's.
  #
  # A Rails app mounts it behind its own authentication, as Sidekiq's web UI:
  #
  #   # config/initializers/ratekeeper.rb
  #   Ratekeeper::Web.configure(auth: ->(env) { env["warden"]&.user&.admin? },
  #                             actor: ->(env) { env["warden"].user.email })
  #   # config/routes.rb
  #   mount Ratekeeper::Web, at: "/ratekeeper"
  #
  # It works on the store and throttles of the Ratekeeper::Rack::Middleware
  # in front of it (a Rails app has one: the memory store too), or on the
  # gate or store it is given. A plain Rack app maps an instance, behind a
  # session (Rack::Session::Cookie):
  #
  #   map("/ratekeeper") { run Ratekeeper::Web.new(auth: ->(env) { ... }, store: "redis://...") }
  #
  # +auth+ must be given: there is no default that lets anyone in. Every
  # change is a POST carrying the session's CSRF token; every stored text
  # (keys and reasons are attacker-chosen) is escaped.
  class Web
    VIEWS = File.join(__dir__, "web")
    # The windows "who is limited now" is shown over.
    WINDOWS = { "5m" => 300, "60m" => 3600 }.freeze
    # How long "Extend a week" extends an entry for.
    WEEK = 7 * 86_400
    # The changes the page shows, newest first.
    HISTORY = 50
    # The chart's width and height, in pixels.
    CHART = [360, 60].freeze
    CSRF = "ratekeeper.csrf"
    FLASH = "ratekeeper.flash"
    # The headers of every response, its redirects too (the Django page
    # sends the same): never framed, no script, nothing loaded, posted only
    # to itself, never cached.
    GUARD = { "cache-control" => "no-store", "x-frame-options" => "DENY", "x-content-type-options" => "nosniff",
              "content-security-policy" => CONSOLE_CSP }.freeze
    HEADERS = { "content-type" => "text/html; charset=utf-8", **GUARD }.freeze

    class << self
      # Configures the console that +mount Ratekeeper::Web+ serves (the
      # options of #initialize).
      def configure(**options)
        @app = new(**options)
      end

      # Serves a request with the configured console; refuses every request
      # (403) until Ratekeeper::Web.configure gave it an auth callable.
      def call(env)
        return @app.call(env) if @app

        [403, { "content-type" => "text/plain", **GUARD },
         ["Ratekeeper::Web is not configured: call Ratekeeper::Web.configure(auth: ->(env) { ... }) " \
          "in an initializer (there is no default that lets anyone in)\n"]]
      end
    end

    # +auth+: a callable given the Rack env, true for an operator (required).
    # +actor+: a callable given the Rack env naming the operator, whose
    # changes the audit trail records as theirs (default "web").
    # +gate+: the Ratekeeper::Gate whose store and throttles the console
    # shows; or +store+ (a Redis URL), +prefix+ and +redis_module+, with
    # +scopes+ ({scope => rules}) for a key's usage. Given neither, it uses
    # the gate of the Ratekeeper::Rack::Middleware in front of it.
    def initialize(auth:, actor: nil, gate: nil, store: nil, prefix: nil, redis_module: nil, scopes: nil)
      raise ConfigurationError, "Ratekeeper::Web needs auth: a callable given the Rack env (true lets it in)" \
        unless auth.respond_to?(:call)
      raise ConfigurationError, "Ratekeeper::Web's actor must be a callable given the Rack env" \
        unless actor.nil? || actor.respond_to?(:call)
      raise ConfigurationError, "Ratekeeper::Web takes a gate or a store, not both" if gate && store

      @auth = auth
      @actor = actor || ->(_env) { "web" }
      @gate = gate || (store && gate_on(store.to_s, prefix, redis_module))
      @scopes = scopes&.to_h { |scope, rules| [scope.to_s, rules.to_s] }
    end

    # Serves one request of the console (under the path it is mounted at).
    def call(env)
      return Page.render(403, "forbidden", message: "You may not use this console.") unless @auth.call(env)

      session = env["rack.session"]
      unless session
        return Page.render(500, "forbidden",
                           message: "Ratekeeper::Web needs a session (rack.session) for its CSRF token.")
      end

      gate = @gate || env["ratekeeper.gate"]
      unless gate
        return Page.render(500, "forbidden", message: "Ratekeeper::Web found no store: mount it behind " \
                                                      "Ratekeeper::Rack::Middleware, or give it gate: or store:.")
      end

      session[CSRF] ||= SecureRandom.hex(32)
      Visit.new(::Rack::Request.new(env), session, gate, @actor.call(env).to_s,
                (@scopes || gate.throttle_rules).sort).route
    end

    private

    # A gate with no throttles on the store +url+ names (a console's own
    # connections); a memory:// store is one process's, so it is refused.
    def gate_on(url, prefix, redis_module)
      if url.start_with?("memory:")
        raise ConfigurationError, "Ratekeeper::Web cannot show a memory:// store given by URL (it would be a new, " \
                                  "empty one): mount it behind Ratekeeper::Rack::Middleware or give it gate:"
      end

      Gate.new({ "store" => { "url" => url, "prefix" => prefix, "redis_module" => redis_module }.compact })
    end

    # The templates (web/*.erb), each rendered with its locals and the helpers.
    module Page
      TEMPLATES = %w[index confirm key forbidden messages].to_h do |view|
        [view, ERB.new(File.read(File.join(VIEWS, "#{view}.erb")), trim_mode: "-")]
      end.freeze

      # The response: +view+ rendered with +locals+.
      def self.render(status, view, **locals)
        [status, HEADERS.dup, [TEMPLATES.fetch(view).result(Helpers.new(locals).binding_here)]]
      end

      # +seconds+ as its two largest units ("59m 59s", "6d 23h").
      def self.time_left(seconds)
        whole = [seconds.to_i, 0].max
        parts = []
        [["d", 86_400], ["h", 3600], ["m", 60], ["s", 1]].each do |unit, size|
          count, whole = whole.divmod(size)
          parts << "#{count}#{unit}" if count.positive? || !parts.empty?
        end
        parts.empty? ? "0s" : parts.first(2).join(" ")
      end
    end

    # What a template sees: its locals as methods, and the helpers.
    class Helpers
      def initialize(locals)
        locals.each { |name, value| define_singleton_method(name) { value } }
      end

      # +text+ escaped for HTML (every stored text passes through it).
      def h(text)
        ERB::Util.html_escape(text.to_s)
      end

      # The template +view+ (a part of a page) rendered with these locals.
      def partial(view)
        Page::TEMPLATES.fetch(view).result(binding_here)
      end

      # The pages' style sheet (the Django page's too).
      def style
        CONSOLE_STYLE
      end

      # The hidden fields naming a row's target: a key's stored form (+tag+,
      # with tag=1: the very key, hashed or not UTF-8, whatever +shown+
      # shows), else the text shown (an address or a network).
      def target_fields(shown, tag)
        return %(<input type="hidden" name="target" value="#{h(shown)}">) unless tag

        %(<input type="hidden" name="target" value="#{h(tag)}"><input type="hidden" name="tag" value="1">)
      end

      # The hidden field carrying the session's CSRF token.
      def csrf_field
        %(<input type="hidden" name="csrf" value="#{h(session[CSRF])}">)
      end

      # +epoch+ as a time in the site's zone (Rails' Time.zone; else UTC), named.
      def shown_time(epoch)
        zone = ::Time.respond_to?(:zone) ? ::Time.zone : nil
        (zone ? zone.at(epoch) : ::Time.at(epoch).utc).strftime("%Y-%m-%d %H:%M:%S %Z")
      end

      # +epoch+ as an ISO 8601 time (a <time datetime>).
      def iso_time(epoch)
        Time.at(epoch).utc.iso8601
      end

      # +seconds+ as its two largest units (Page.time_left).
      def time_left(seconds)
        Page.time_left(seconds)
      end

      # The denials-per-minute chart's bars: x, y, width, height, title.
      def bars(per_minute)
        width, height = CHART
        peak = [per_minute.map { |m| m[:count] }.max || 0, 1].max
        step = width.to_f / [per_minute.size, 1].max
        per_minute.each_with_index.map do |minute, i|
          tall = (height.to_f * minute[:count] / peak).round(1)
          { x: (i * step).round(1), y: (height - tall).round(1), width: [(step - 1).round(1), 1].max, height: tall,
            title: "#{Time.at(minute[:at]).utc.strftime("%H:%M UTC")}: #{minute[:count]} denied" }
        end
      end

      def binding_here
        binding
      end
    end

    # One request to the console: its routes and forms.
    class Visit
      # Why a card of a key named by its stored form sets no tier or override.
      BY_TAG = "A key named by its stored form takes no tier or override here: set them by the key itself."

      # +actor+ names the operator; +scopes+: [[scope, rules], ...].
      def initialize(request, session, gate, actor, scopes)
        @request = request
        @session = session
        @gate = gate
        @actor = actor
        @scopes = scopes
      end

      # The answer to the request, by its method and path.
      def route
        post = @request.post?
        return page(403, "forbidden", message: "The form's CSRF token is missing or wrong.") if post && !csrf?

        case [@request.request_method, @request.path_info.sub(%r{/\z}, "")]
        when ["GET", ""] then index
        when ["POST", "/add"] then add
        when ["POST", "/remove"] then remove
        when ["POST", "/extend"] then extend_entry
        when ["POST", "/switches"] then switches
        when ["GET", "/key"], ["POST", "/key"] then key_card
        else page(post ? 405 : 404, "forbidden", message: "Nothing here.")
        end
      rescue StorageError => e
        index(errors: ["The store could not be reached: #{e.message}"], status: 503, read: false)
      end

      private

      def csrf?
        given = field("csrf")
        expected = @session[CSRF].to_s
        !given.empty? && given.bytesize == expected.bytesize && ::Rack::Utils.secure_compare(given, expected)
      end

      # A posted field as text ("" when absent or not text).
      def field(name)
        value = @request.POST[name]
        value.is_a?(String) ? value : ""
      rescue ::Rack::Utils::ParameterTypeError, ::Rack::Utils::InvalidParameterError, EOFError
        ""
      end

      def admin
        @admin ||= @gate.admin(actor: @actor)
      end

      def page(status, view, **locals)
        Page.render(status, view, **locals, session: @session, base: @request.script_name, actor: @actor)
      end

      # The page: who is limited, the lists, the switches, the history
      # (+read+: false when the store just failed, so it is not asked again).
      def index(errors: [], form: {}, status: 200, read: true)
        window = WINDOWS.key?(@request.GET["window"]) ? @request.GET["window"] : "5m"
        data = { listings: [], others: [], history: [], switches: {},
                 top: { keys: [], addresses: [], networks: [], per_minute: [] } }
        if read
          begin
            entries = admin.entries
            listed = entries.select { |e| %w[safelist blocklist].include?(e[:kind]) }
            data = { listings: listed, others: entries - listed, top: admin.top_denied(window: WINDOWS[window]),
                     switches: admin.switches, history: admin.history(limit: HISTORY) }
          rescue StorageError => e
            status = 503
            errors += ["The store could not be read: #{e.message}"]
          end
        end
        page(status, "index", **data, window: window, errors: errors, form: form, now: Time.now.to_f,
                                       flash: @session.delete(FLASH))
      end

      def add
        form = %w[list target ttl reason].to_h { |name| [name, field(name).strip] }
        errors = []
        errors << "Choose block or safelist." unless %w[block safelist].include?(form["list"])
        errors << "Give a target: a key, an IP address or a CIDR range." if form["target"].empty?
        ttl = seconds(form["ttl"], errors)
        return index(errors: errors, form: form, status: 400) unless errors.empty?

        entry = admin.public_send(form["list"] == "block" ? :block : :safelist, form["target"],
                                  ttl: ttl, reason: form["reason"], key: field("key") == "1", tag: tag?)
        redirect("Added #{entry[:target]} to the #{entry[:kind]} for #{left(entry)}.")
      rescue ConfigurationError => e
        index(errors: [e.message], form: form, status: 400)
      end

      # The posted entry's kind, target and scope (nil: everywhere), or nil
      # when the form names none.
      def posted_entry
        kind, target, scope = %w[kind target scope].map { |name| field(name) }
        [kind, target, scope.empty? ? nil : scope] if %w[safelist blocklist].include?(kind) && !target.empty?
      end

      def remove
        kind, target, scope = posted_entry
        return index(errors: ["Nothing to remove."], status: 400) unless kind

        removed = if kind == "safelist"
                    admin.unsafelist(target, tag: tag?)
                  else
                    admin.unblock(target, key: !scope.nil?, scope: scope, tag: tag?)
                  end
        where = scope ? " in scope #{scope}" : ""
        redirect(removed ? "Removed #{target} from the #{kind}#{where}." :
                           "#{target} was not on the #{kind}#{where} (it may have expired).")
      rescue ConfigurationError => e
        index(errors: [e.message], status: 400)
      end

      def extend_entry
        kind, target, scope = posted_entry
        return index(errors: ["Nothing to extend."], status: 400) unless kind

        key = field("key") == "1" || !scope.nil?
        options = { ttl: WEEK, reason: field("reason"), key: key, tag: tag? }
        entry = kind == "safelist" ? admin.safelist(target, **options) : admin.block(target, **options, scope: scope)
        redirect("Extended #{entry[:target]} on the #{entry[:kind]} for #{Page.time_left(WEEK)}.")
      rescue ConfigurationError => e
        index(errors: [e.message], status: 400)
      end

      # The switches posted: a confirmation page, then (confirm=yes) the change.
      def switches
        errors = []
        change = asked_switches(errors)
        errors << "Nothing to change: choose a switch." if errors.empty? && change.empty?
        return index(errors: errors, status: 400) unless errors.empty?

        reason = field("reason").strip
        unless field("confirm") == "yes"
          return page(200, "confirm", change: change, reason: reason, current: admin.switches)
        end

        now = admin.set_switches(**change, reason: reason)
        redirect("Switches are now #{now.map { |name, value| "#{name}=#{value}" }.join(", ")}.")
      rescue ConfigurationError => e
        index(errors: [e.message], status: 400)
      end

      # The switches the form changes ({enabled:, shadow:, multiplier:}).
      def asked_switches(errors)
        change = {}
        %w[enabled shadow].each do |name|
          value = field(name)
          next if value.empty?

          if %w[on off].include?(value)
            change[name.to_sym] = value == "on"
          else
            errors << "#{name} is on or off, not #{value.inspect}"
          end
        end
        multiplier = field("multiplier").strip
        unless multiplier.empty?
          begin
            change[:multiplier] = Float(multiplier)
          rescue ArgumentError
            errors << "invalid multiplier #{multiplier.inspect}: give a number above 0"
          end
        end
        change
      end

      # Whether the posted target is a key's stored form (tag=1: a row of
      # the denied keys or of the entries).
      def tag?
        field("tag") == "1"
      end

      # A key's card (tag=1: the key named by its stored form, as the denied
      # table links it; scope=: a limiter's scope to show its leases in); a
      # POST sets or clears its tier or override, or releases a lease.
      def key_card
        key = @request.post? ? field("key") : @request.GET["key"].to_s
        tag = @request.post? ? tag? : @request.GET["tag"] == "1"
        lease_scope = (@request.post? ? field("scope") : @request.GET["scope"].to_s).strip
        return index(errors: ["Give a key to look up."], status: 400) if key.empty?

        errors = []
        if @request.post?
          errors = if field("action") == "release_lease" then release_lease(key, lease_scope)
                   else tag ? [BY_TAG] : assign(key)
                   end
        end
        if @request.post? && errors.empty?
          unless field("action") == "release_lease"
            @session[FLASH] = "#{field("value").strip.empty? ? "Cleared" : "Set"} #{key}'s #{field("action")}."
          end
          query = { "key" => key }.merge(lease_scope.empty? ? {} : { "scope" => lease_scope })
          card = "#{@request.script_name}/key?#{::Rack::Utils.build_query(query)}"
          return [303, GUARD.merge("location" => card), []]
        end

        usage = @scopes.map { |scope, rules| [scope, admin.usage(key, rules, scope: scope, tag: tag).rules] }
        seen_in = @scopes.to_h { |scope, _rules| [scope, admin.inspect_key(key, scope: scope, tag: tag)] }
        bans = seen_in.filter_map { |scope, seen| [scope, seen[:scope_blocklist]] if seen[:scope_blocklist] }
        seen = admin.inspect_key(key, tag: tag)
        seen_in[lease_scope] ||= admin.inspect_key(key, scope: lease_scope, tag: tag) unless lease_scope.empty?
        leases = [["", seen], *seen_in.to_a].flat_map { |scope, s| s[:leases].map { |lease| [scope, lease] } }
        page(errors.empty? ? 200 : 400, "key", key: key, tag: tag, seen: seen, usage: usage, bans: bans,
                                               leases: leases, lease_scope: lease_scope, errors: errors,
                                               flash: @session.delete(FLASH))
      rescue ConfigurationError => e
        index(errors: [e.message], status: 400)
      end

      # Releases the lease posted (a holder that hangs); the errors.
      def release_lease(key, scope)
        id = field("lease_id")
        return ["#{key} holds no lease #{id} (it lapsed, or was released)."] unless
          admin.release_lease(key, id, scope: scope, reason: field("reason"))

        @session[FLASH] = "Released lease #{id} of #{key}."
        []
      rescue ConfigurationError => e
        [e.message]
      end

      # Sets or clears +key+'s tier or override as posted; the errors.
      def assign(key)
        value = field("value").strip
        value = nil if value.empty?
        case field("action")
        when "tier" then admin.set_tier(key, value, reason: field("reason"))
        when "override" then admin.set_override(key, value, reason: field("reason"))
        else return ["Choose a tier or an override to set."]
        end
        []
      rescue ConfigurationError => e
        [e.message]
      end

      def seconds(text, errors)
        return nil if text.empty?

        Float(text)
      rescue ArgumentError
        errors << "invalid ttl #{text.inspect}: give seconds, or leave it blank for one week"
        nil
      end

      def left(entry)
        Page.time_left(entry[:expires_at] - Time.now.to_f)
      end

      def redirect(message)
        @session[FLASH] = message
        [303, GUARD.merge("location" => "#{@request.script_name}/"), []]
      end
    end
    private_constant :Page, :Helpers, :Visit
  end
end
