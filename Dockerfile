# sluice's image, in two stages: the release build, then a slim runtime with the binary alone.
# (Not built in sluice's own CI, which has no container runtime: see deploy/kubernetes.)
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p sluice-cli

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/sluice /usr/local/bin/sluice
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/sluice"]
CMD ["serve", "--config", "/etc/sluice/sluice.toml"]
