# frozen_string_literal: true

require_relative "ruby/lib/ratekeeper/version"

# RATEKEEPER_NATIVE, the extension compiled for this machine's Ruby
# (scripts/dist puts it at ruby/lib/ratekeeper/ratekeeper.so): the platform
# gem, which holds it and builds nothing on install. Else the source gem,
# whose extension cargo builds on install. RATEKEEPER_PLATFORM names the
# platform of an extension compiled for another machine (scripts/dist's
# aarch64-linux), else it is this machine's.
native = ENV["RATEKEEPER_NATIVE"].to_s
platform = ENV["RATEKEEPER_PLATFORM"].to_s

Gem::Specification.new do |spec|
  spec.name = "ratekeeper"
  spec.version = Ratekeeper::VERSION
  spec.summary = "Exact multi-rule rate limiting over a sliding log, in memory or Redis, for Rack and Rails"
  spec.description = "One Rust core (also shipped for Python) checks several rules at once, atomically, " \
                     "in one Redis round trip, with the Redis clock; quotas are shared across languages."
  spec.authors = ["the ratekeeper authors"]
  spec.license = "MIT"
  # (Ruby 3.1 is what CI proves: Debian 12's; docs/install.md)
  spec.required_ruby_version = ">= 3.1"

  spec.require_paths = ["ruby/lib"]
  spec.add_dependency "rack", ">= 2.0", "< 4"
  unless native.empty?
    spec.platform = platform.empty? ? Gem::Platform.local : Gem::Platform.new(platform)
    # an extension works with the Ruby it was compiled for
    spec.required_ruby_version = "~> #{RUBY_VERSION[/\A\d+\.\d+/]}.0"
    spec.files = Dir["Cargo.toml", "LICENSE", "README.md", "CHANGELOG.md", "ruby/lib/**/*.rb", "ruby/lib/ratekeeper/web/*.erb",
                 "ruby/sig/**/*.rbs"] +
                 [native]
    next
  end

  # The native extension is built by cargo from the workspace, so the gem
  # carries the workspace manifest, its lock file and every member's sources.
  spec.files = Dir[
    "Cargo.toml", "Cargo.lock", "LICENSE", "README.md", "CHANGELOG.md",
    "engine/Cargo.toml", "engine/src/**/*.rs", "engine/lua/*.lua", "module/Cargo.toml", "module/src/**/*.rs",
    "core/Cargo.toml", "core/src/**/*.rs", "core/src/**/*.css", "core/benches/*.rs",
    "replay/Cargo.toml", "replay/src/**/*.rs",
    "python/Cargo.toml", "python/src/**/*.rs",
    "server/Cargo.toml", "server/build.rs", "server/src/**/*.rs", "server/proto/**/*",
    "ruby/ext/ratekeeper/Cargo.toml", "ruby/ext/ratekeeper/extconf.rb", "ruby/ext/ratekeeper/src/**/*.rs",
    "ruby/lib/**/*.rb", "ruby/lib/ratekeeper/web/*.erb", "ruby/sig/**/*.rbs"
  ]
  spec.extensions = ["ruby/ext/ratekeeper/extconf.rb"]
end
