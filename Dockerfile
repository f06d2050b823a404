# SPDX-License-Identifier: Apache-2.0
#
# cor in a container: `docker build -t cor .` then
# `docker run -p 8080:8080 cor` (docs/operations.md, "Containers"). With
# podman, `podman build --format docker`: its default, OCI, format has no
# HEALTHCHECK and drops it.
# Two stages: the builder has the whole toolchain (./configure
# --install-deps, as on a developer's machine), the final image only the
# libraries cor links at run time, so that it stays small and carries no
# compiler.

FROM debian:12-slim AS builder
WORKDIR /src
COPY . .
# /usr/local: where the binary looks for its modules (COR_PREFIX) when
# they are not beside it. --install-deps also brings the test and
# benchmark peers; it is the one documented way to get the build's
# packages, and none of it reaches the final image.
RUN ./configure --install-deps --prefix=/usr/local --sysconfdir=/etc \
    && make -j"$(nproc)" \
    && make install DESTDIR=/stage prefix=/usr/local

FROM debian:12-slim
# The shared libraries of cor and its modules, nothing else. liburing2
# is for the io_uring event backend, which links it once it lands; until
# then it is installed unused, so that the image need not change with it.
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        libssl3 libyaml-0-2 libc-ares2 libjansson4 liburing2 \
    && rm -rf /var/lib/apt/lists/*
# cor never needs root in a container: the port is above 1024 and the pid
# file lives in /run/cor, which the cor user owns. A fixed numeric id, so
# that Kubernetes' runAsNonRoot can check it (it cannot check a name);
# not --system, whose range (below 1000) useradd warns that it is outside,
# and no lastlog entry (--no-log-init) for a user that never logs in.
RUN groupadd --gid 10001 cor \
    && useradd --uid 10001 --gid cor --no-create-home --no-log-init \
        --home-dir /nonexistent --shell /usr/sbin/nologin cor \
    && install -d -o cor -g cor /run/cor
COPY --from=builder /stage/usr/local/bin/cor /stage/usr/local/bin/cor-request \
    /usr/local/bin/
COPY --from=builder /stage/usr/local/lib/cor/modules /usr/local/lib/cor/modules
# The health check, and the reload sidecar's loop (deploy/kubernetes).
COPY deploy/cor-health deploy/cor-reload-watch /usr/local/bin/
COPY deploy/kubernetes/cor.yaml /etc/cor/cor.yaml
USER 10001:10001
# The port of the default configuration's listener; cor-health reads it
# from the YAML, so a configuration mounted over /etc/cor/cor.yaml that
# listens elsewhere is still checked where it listens.
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["cor-health"]
# SIGQUIT is cor's graceful stop: the listeners close, requests in flight
# finish (runtime.stop_timeout), then it exits. SIGTERM would answer every
# waiting request 503 at once. `docker stop -t` must exceed stop_timeout.
STOPSIGNAL SIGQUIT
ENTRYPOINT ["cor"]
CMD ["-c", "/etc/cor/cor.yaml"]
