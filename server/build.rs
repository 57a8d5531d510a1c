//! Generates the Envoy rate limit service's messages and server stub from
//! the vendored protos (`proto/`, trimmed copies of Envoy's; see
//! `proto/README.md`). Needs `protoc` (Debian: `protobuf-compiler` and
//! `libprotobuf-dev`, which `scripts/setup-debian` installs).
fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    tonic_prost_build::configure()
        .build_client(false)
        .compile_protos(&["proto/envoy/service/ratelimit/v3/rls.proto"], &["proto"])?;
    Ok(())
}
