# Partita's server image: built with the Rust toolchain, run on a slim
# Debian with only the binary (the database is external: see
# docker-compose.yml; the embedded PostgreSQL is for running without one).
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# .cargo/config.toml sets SQLX_OFFLINE: the queries are checked against the
# committed .sqlx/ data, no database needed to build.
RUN cargo build --release --locked --bin partita

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --home-dir /var/lib/partita --create-home partita
COPY --from=build /src/target/release/partita /usr/local/bin/partita
USER partita
WORKDIR /var/lib/partita
EXPOSE 8080
ENTRYPOINT ["partita"]
CMD ["serve", "--data-dir", "/var/lib/partita", "--listen", "0.0.0.0:8080"]
