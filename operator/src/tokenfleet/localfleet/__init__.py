"""A local fleet: the real operator, real Prometheus and simulated engines on one machine.

Used by `tokenfleet demo` and by the closed-loop system test. Parts:

- emulated.py  the **emulated Kubernetes API (kmock)**: tokenfleet.testing.kmock_cluster
               served on a loopback port, with a kubeconfig pointing at it. It is the only
               emulated component; it needs the `demo` extra (kmock).
- examples/    the LLMService the demo applies by default (package data, a copy of the
               repository's examples/llama-3.1-8b-l4-autoscale.yaml).
- operator.py  the real `tokenfleet operator` process, logged in through that kubeconfig.
- prometheus.py a real Prometheus (Debian package) with file-based service discovery, so
               scrape targets follow the pods without a restart; it can be stopped and
               started again on the same port and TSDB (the "Prometheus is down" case).
- pods.py      pure: a Deployment's pod template -> `tokenfleet sim` arguments, pod names,
               the file_sd target groups with the labels the PodMonitor gives every series.
- kubelet.py   plays the kubelet + ReplicaSet: one `tokenfleet sim` process per replica of
               each engine Deployment, ready after a cold start, Deployment status written
               back through the API, targets handed to Prometheus, endpoints to the load.
- load.py      open-loop Poisson load on a schedule, through tokenfleet.bench's client,
               spread over the ready endpoints like a Service.
- fleet.py     starts all of it in order and stops every process it started, also on
               Ctrl-C / SIGTERM.

Time. `tokenfleet sim --time-scale K` runs each engine K times faster than the wall clock
and keeps its latency histograms in simulated seconds. A Prometheus rate() is per wall
second, though, and the autoscaler's windows are in seconds of its own clock. So the whole
fleet runs as a K-times-faster copy of a real one, every clock in simulated seconds:
- the kubelet's cold start (simulated seconds) lasts cold_start / K wall seconds;
- the load generator sends K x the simulated request rate (a simulated req/s is K wall req/s);
- Prometheus scrapes every PodMonitor interval / K wall seconds;
- the operator runs with `--time-scale K`: its autoscaler's clock and timer, and the PromQL
  windows, are simulated seconds, and measured rates are divided by K.
Latencies, attainment, queue lengths and KV usage need no conversion. With that, an
LLMService's windows (30 s up, 180 s down by default) and the plan's req/s per replica apply
as written.
"""
