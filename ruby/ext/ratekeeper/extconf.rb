# frozen_string_literal: true

# Writes a Makefile that builds the extension with cargo (the rb_sys helper gem
# is not needed). `make` runs `cargo build --locked` (release) in the gem's
# Cargo workspace and copies the library to ratekeeper.so; `make install`
# installs it as ratekeeper/ratekeeper.so and removes the cargo target dir.
#
# RATEKEEPER_CARGO_TARGET_DIR: reuse (and keep) this cargo target dir instead.
# RATEKEEPER_PACKAGE_PROFILE: build in this cargo profile instead of release
# (the project's own CI builds in `ci`: release without its cross-crate LTO).

require "rbconfig"
require "fileutils"

here = File.expand_path(__dir__)
root = File.expand_path("../../..", here) # the gem root, which holds Cargo.toml
abort "ratekeeper: #{root}/Cargo.toml not found" unless File.exist?(File.join(root, "Cargo.toml"))
abort "ratekeeper: cargo not found on PATH; install Rust 1.88 or newer" unless system("cargo --version", out: File::NULL)

shared = ENV["RATEKEEPER_CARGO_TARGET_DIR"].to_s
target = shared.empty? ? File.join(here, "target") : File.expand_path(shared)
remove_target = shared.empty? ? "rm -rf '#{target}'" : "true"
profile = ENV["RATEKEEPER_PACKAGE_PROFILE"].to_s
profile = "release" if profile.empty?
abort "ratekeeper: RATEKEEPER_PACKAGE_PROFILE must name a cargo profile (letters, digits, - and _)" unless profile.match?(/\A[A-Za-z0-9_-]+\z/)
out_dir = profile == "dev" ? "debug" : profile
dlext = RbConfig::CONFIG["DLEXT"]
library = RbConfig::CONFIG["host_os"] =~ /darwin/ ? "libratekeeper.dylib" : "libratekeeper.so"

File.write("Makefile", <<~MAKE)
  RUBY = #{RbConfig.ruby}
  CARGO ?= cargo
  TARGET_DIR = #{target}
  sitearchdir ?= #{RbConfig::CONFIG["sitearchdir"]}
  sitelibdir ?= #{RbConfig::CONFIG["sitelibdir"]}

  all: ratekeeper.#{dlext}

  ratekeeper.#{dlext}:
  \tcd '#{root}' && RUBY='$(RUBY)' CARGO_TARGET_DIR='$(TARGET_DIR)' $(CARGO) build --profile #{profile} --locked -p ratekeeper-ruby
  \tcp '$(TARGET_DIR)/#{out_dir}/#{library}' ratekeeper.#{dlext}

  install: ratekeeper.#{dlext}
  \tmkdir -p '$(sitearchdir)/ratekeeper'
  \tcp ratekeeper.#{dlext} '$(sitearchdir)/ratekeeper/ratekeeper.#{dlext}'
  \t#{remove_target}

  clean:
  \t#{remove_target}
  \trm -f ratekeeper.#{dlext}

  .PHONY: all install clean
MAKE
