# frozen_string_literal: true

module Ratekeeper
  # The version, read from the one place that holds it: the Cargo
  # workspace's [workspace.package] (Cargo.toml, which the gem ships), from
  # which the crates, the wheel, the gem and both command lines take it.
  VERSION = File.read(File.expand_path("../../../Cargo.toml", __dir__))[
    /^\[workspace\.package\][^\[]*?^version = "([^"]+)"/m, 1
  ] or raise LoadError, "ratekeeper: no version in the [workspace.package] of its Cargo.toml"
end
