"""The ``availproof`` command line: every command, its flags and the function it calls."""

from __future__ import annotations

import argparse

from chaos.commands.cluster import (cmd_checkpoint, cmd_cluster_down, cmd_cluster_status, cmd_cluster_up, cmd_deploy,
                                    cmd_recover)
from chaos.commands.results import cmd_analyse, cmd_claim, cmd_report, cmd_validate
from chaos.commands.runs import cmd_capacity, cmd_run, cmd_soak, cmd_suite
from chaos.commands.scorecard import cmd_scorecard
from chaos.system.frontdoor import FRONTS

DESCRIPTION = "`availproof`: argument parsing and wiring only; the work is done by the modules it calls."


def _fronts(text: str) -> list[str]:
    """``lb,direct`` -> ["lb", "direct"]; anything else is a usage error (argparse: one line, exit 2)."""
    import argparse

    out = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in out if t not in FRONTS]
    if not out or bad or len(set(out)) != len(out):
        raise argparse.ArgumentTypeError(f"{text!r}: a comma-separated list of {', '.join(FRONTS)}, each once")
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="availproof", description=DESCRIPTION)
    sub = p.add_subparsers(dest="command", required=True)

    cluster = sub.add_parser("cluster", help="a local multi-zone Ray cluster with GCS state in Redis")
    csub = cluster.add_subparsers(dest="action", required=True)
    up = csub.add_parser("up", help="start Redis, the head and one raylet per topology node")
    up.add_argument("--topology", default=None, help="topology YAML, or a shipped name: default, two-regions")
    up.add_argument("--no-gcs-ft", action="store_true", help="start the head without external Redis (contrast case)")
    up.add_argument("--netns", action="store_true",
                    help="one network namespace per zone on a bridge, so zones can be partitioned (needs root)")
    up.set_defaults(func=cmd_cluster_up)
    status = csub.add_parser("status", help="every node with its domain and liveness, Redis, Serve replicas")
    status.add_argument("--no-replicas", action="store_true", help="skip the Serve replica table")
    status.set_defaults(func=cmd_cluster_status)
    down = csub.add_parser("down", help="stop everything the cluster started (idempotent)")
    down.set_defaults(func=cmd_cluster_down)
    dep = sub.add_parser("deploy", help="deploy the Serve app on the running local cluster")
    dep.add_argument("--app", choices=("stream", "llm"), default="stream")
    dep.add_argument("--replicas-per-zone", type=int, default=1)
    dep.add_argument("--model-path", default=None, help="checkpoint directory for --app llm (default: the tiny one)")
    dep.add_argument("--timeout", type=float, default=600.0)
    dep.set_defaults(func=cmd_deploy)

    ck = sub.add_parser("checkpoint", help="build the tiny offline checkpoint (random weights, local tokenizer)")
    ck.add_argument("dir", nargs="?", default=None)
    ck.add_argument("--seed", type=int, default=0)
    ck.set_defaults(func=cmd_checkpoint)

    run = sub.add_parser("run", help="run one experiment file (brings the cluster up and deploys if needed)")
    run.add_argument("experiment")
    run.add_argument("--trials", type=int, default=1)
    run.add_argument("--plan", action="store_true",
                     help="list every object each fault would touch (pods, nodes, policies, helper pods, the "
                          "RayService; locally processes and nodes) and change nothing")
    run.set_defaults(func=cmd_run)

    su = sub.add_parser("suite", help="run the experiments in turn and print one summary table")
    su.add_argument("--full", action="store_true", help="every experiment, not just the quick default set")
    su.add_argument("--only", nargs="*", default=None, help="experiment names to run")
    su.add_argument("--keep-cluster", action="store_true", help="leave the cluster up at the end")
    su.set_defaults(func=cmd_suite)
    demo = sub.add_parser("demo", help="the main job on the embedded default: the quick suite, then down")
    demo.add_argument("--full", action="store_true")
    demo.add_argument("--no-prometheus", dest="prometheus", action="store_false",
                      help="do not start the Prometheus server the demo runs by default")
    demo.set_defaults(func=cmd_suite, only=None, keep_cluster=False, prometheus=True)

    rec_ = sub.add_parser("recover", help="restore the local cluster after a killed run (idempotent)")
    rec_.add_argument("--app", choices=("stream", "llm"), default="stream")
    rec_.set_defaults(func=cmd_recover)
    rep = sub.add_parser("report", help="the evidence of a run: figures, bounds, trials statistics, timeline, environment (md, html, json)")
    rep.add_argument("run_dir", nargs="?", default=None, help="a run, a run with trials, or a suite directory")
    rep.add_argument("--format", choices=("md", "html", "json", "all"), default="md",
                     help="md and json are printed too; html is self-contained (timeline embedded); all writes the three")
    rep.add_argument("--compare", nargs=2, metavar=("A", "B"), default=None,
                     help="two run directories side by side, with whether each difference exceeds the intervals")
    rep.set_defaults(func=cmd_report)
    ana = sub.add_parser("analyse", help="derive summary.json (and the report) again from the records alone, with the "
                                         "definitions the run recorded, an experiment file's, or the defaults")
    ana.add_argument("run_dir", help="a run, a run with trials, or a suite directory")
    ana.add_argument("--experiment", default=None, help="take the definitions and bounds from this experiment file")
    ana.set_defaults(func=cmd_analyse)
    from chaos.claim.rates import DEFAULT_TARGET_PCT

    cl = sub.add_parser("claim", help="an availability claim from a suite's runs and expected fault rates: "
                                      "claim.json (+ md/html) in the suite directory; exit 0 only when supported")
    cl.add_argument("suite_dir", metavar="SUITE_DIR", nargs="?", default=None,
                    help="a suite, an experiment's trials, or one run (not with --calibrate)")
    cl.add_argument("--faults", default=None, metavar="RATES",
                    help="YAML: period_days and, per scope, events (per period) or count and exposure_days, "
                         "duration_s, unrecovered_cost_s, source "
                         "(experiments/rates/example-rates.yaml)")
    cl.add_argument("--target", default=str(DEFAULT_TARGET_PCT), metavar="PCT",
                    help=f"the availability claimed, in percent ({DEFAULT_TARGET_PCT:g})")
    cl.add_argument("--slo-target", default=None, metavar="PCT",
                    help="also claim this share of a period's service within the SLO, in percent (latency included)")
    cl.add_argument("--plan", action="store_true",
                    help="print which trials to run next (the one that narrows the expected loss most first), with "
                         "their commands, instead of the claim")
    cl.add_argument("--risk", default="0.05", help="the largest acceptable chance that a period misses the target")
    cl.add_argument("--population", choices=("service", "affected"), default="service",
                    help="whose requests count: every target's, or the lost domain's users (needs zonal-lb or direct runs)")
    cl.add_argument("--format", choices=("md", "html", "json", "all"), default="md",
                    help="claim.json is always written; md and json are printed too")
    cl.add_argument("--seed", type=int, default=0, help="seed of every simulation")
    cl.add_argument("--credibility", default="0.9", metavar="C",
                    help="supported only when P(P(miss) <= risk) reaches C (0.9): what is unknown kept apart from "
                         "what is random (docs/claim.md)")
    cl.add_argument("--pool-scopes", action="store_true",
                    help="pool the scopes' unrecovered shares (a hierarchical Beta): clean scopes inform each other; "
                         "the claim shows the default prior's credibility beside it")
    cl.add_argument("--with-soak", default=None, metavar="SOAK_DIR",
                    help="count a soak's events as trials of their scopes (recovered or not, their costs where "
                         "measured apart)")
    cl.add_argument("--calibrate", choices=("reduced", "full"), nargs="?", const="reduced", default=None,
                    help="instead of a claim: the rule's operating characteristic on seeded synthetic worlds (how "
                         "often it says supported at 0.5x, 1x, 1.4x, 2x the risk) and the cost model's coverage")
    cl.add_argument("--worlds", type=int, default=None, metavar="N",
                    help="with --calibrate: worlds per cell (reduced 60, full 200)")
    cl.set_defaults(func=cmd_claim)
    so = sub.add_parser("soak", help="faults of several experiments at RATES x a speed-up in one long run, its lost "
                                     "service-seconds set against the claim's prediction (summary.json's soak)")
    so.add_argument("definition", nargs="?", default=None, help="a soak definition (experiments/soak.yaml); flags "
                                                                 "given override its fields")
    so.add_argument("--experiments", nargs="+", default=None, metavar="E", help="experiment files, one per scope")
    so.add_argument("--faults", default=None, metavar="RATES", help="the RATES file (chaos.claim.rates)")
    so.add_argument("--speedup", type=float, default=None, metavar="K", help="each scope's rate x K")
    so.add_argument("--duration", type=float, default=None, metavar="D", help="the soak's length in seconds")
    so.add_argument("--seed", type=int, default=None, help="the schedule's seed (0)")
    so.add_argument("--claim-from", default=None, metavar="SUITE_DIR",
                    help="a suite: its claim under the same RATES predicts the soak's lost service")
    so.add_argument("--app", choices=("stream", "llm"), default=None)
    so.add_argument("--front", choices=FRONTS, default=None, help="the front door over the experiments'")
    so.add_argument("--out", default=None, help="run directory (default: runs/<time>-soak)")
    so.add_argument("--plan", action="store_true", help="print the drawn schedule and start nothing")
    so.add_argument("--cluster-dir", default=None, help="state directory (default: $AVAILPROOF_HOME/cluster)")
    so.set_defaults(func=cmd_soak)
    sc = sub.add_parser("scorecard", help="the detector scorecard: each gray fault x detector x load x health-check "
                                          "period, N trials each; scorecard.json/.md/.svg (docs/scorecard.md)")
    sc.add_argument("spec", metavar="SPEC", nargs="?", default=None,
                    help="the scorecard spec, YAML or JSON (experiments/scorecard.yaml; every key defaulted)")
    sc.add_argument("--out", default=None, help="where each trial's run directory and the tables go "
                                                "(default: runs/<time>-scorecard); trials already there are kept")
    sc.add_argument("--dry-run", action="store_true", help="print the cells (run, or why not) and the estimated "
                                                           "time; run nothing")
    sc.add_argument("--from", dest="from_dir", default=None, metavar="DIR",
                    help="derive the tables again from the runs DIR holds (its plan.json), run nothing")
    sc.add_argument("--model-path", default=None, help="the vLLM app's checkpoint (default: the tiny one)")
    sc.add_argument("--cluster-dir", default=None, help="state directory (default: $AVAILPROOF_HOME/cluster)")
    sc.set_defaults(func=cmd_scorecard)
    val = sub.add_parser("validate", help="check experiment and topology files against their schemas "
                                          "(chaos/schemas/): one line per problem, exit 2 if any")
    val.add_argument("files", nargs="+", metavar="FILE")
    val.add_argument("--app", choices=("stream", "llm"), default=None,
                     help="the app the experiments will run (default: the capacity file's, else stream): "
                          "the timeout warning knows the stream target's token rate, not vLLM's")
    val.set_defaults(func=cmd_validate)
    cap = sub.add_parser("capacity", help="the highest rate the experiment's deployment sustains within its SLO: a "
                                          "stepped sweep with no fault; capacity.json (exit 1 when none is sustained)")
    cap.add_argument("experiment")
    cap.add_argument("--start-rate", type=float, default=None, metavar="R", help="the first step's rate, req/s (1)")
    cap.add_argument("--factor", type=float, default=None, metavar="F", help="each step's rate over the last's (1.5)")
    cap.add_argument("--max-rate", type=float, default=None, metavar="R", help="no step above this rate, req/s (200)")
    cap.add_argument("--max-steps", type=int, default=None, metavar="N", help="steps at most (12)")
    cap.add_argument("--step-s", type=float, default=None, metavar="S", help="seconds measured per step (20)")
    cap.add_argument("--warmup-s", type=float, default=None, metavar="S",
                     help="seconds sent before each step's measurement, not counted (the experiment's load.warmup_s)")
    cap.add_argument("--target-attainment", type=float, default=None, metavar="A",
                     help="the share of a step's requests that must meet the SLO (0.99)")
    cap.add_argument("--max-failed-share", type=float, default=None, metavar="SHARE",
                     help="failed requests beyond this share of a step's break the SLO (0.01)")
    cap.add_argument("--keep-cluster", action="store_true", help="leave the cluster up at the end")
    cap.set_defaults(func=cmd_capacity)

    for c in (run, su, val):
        c.add_argument("--capacity", default=None, metavar="FILE",
                       help="the capacity.json (availproof capacity) an experiment's load.utilization takes its share "
                            "of, over its load.capacity")
    for c in (run, su, demo, cap):
        c.add_argument("--app", choices=("stream", "llm"), default="stream")
        c.add_argument("--model-path", default=None)
        c.add_argument("--out", default=None, help="run directory (default: runs/<time>-<name>)")
        front_help = ("what stands between the client and the Serve proxies, over the experiment's front: direct "
                      "(the client round-robins over the proxies), lb (the rig's HAProxy over every zone), zonal-lb "
                      "(one HAProxy per zone, the others as backup)")
        if c in (run, cap):
            c.add_argument("--front", choices=FRONTS, default=None, help=front_help)
        else:
            c.add_argument("--front", type=_fronts, default=None, metavar="FRONT[,FRONT...]",
                           help=front_help + "; several (e.g. lb,direct) run each experiment once per front door, "
                                             "side by side in the table and the report (NAME@FRONT)")
    for c in (run, su):
        c.add_argument("--prometheus", action="store_true",
                       help="run a Prometheus server (Debian's) scraping the harness and every Ray node meanwhile")
        c.add_argument("--inject-anyway", action="store_true",
                       help="inject the faults even when the baseline is out of steady state (the run is marked so in "
                            "summary.json's baseline_gate; by default such a run stops before any fault, ERROR)")
    for c in (run, su, rec_):
        k = c.add_argument_group("KubeRay backend (flags override the experiment's kubernetes section)")
        k.add_argument("--backend", choices=("local", "kuberay"), default="local")
        k.add_argument("--kube-context", default=None, help="the one kube context to act in")
        k.add_argument("--kube-namespace", default=None, help="the one namespace to act in")
        k.add_argument("--ray-cluster", default=None, help="RayService or RayCluster name (default: availproof)")
        k.add_argument("--serve-url", default=None,
                       help="the serve Service as reachable from here (a NodePort or load balancer that follows the "
                            "active cluster; not a kubectl port-forward, which dies with its pod): see kuberay/README.md")
        k.add_argument("--dashboard-url", default=None,
                       help="the head's dashboard as reachable from here (a NodePort or load balancer; not a "
                            "kubectl port-forward, which dies with the head pod)")
        k.add_argument("--max-pods", type=int, default=None, help="blast-radius limit: pods one fault may hit")
        k.add_argument("--allow-autoscaled-zone-loss", action="store_true", default=None,
                       help="run a zone or region loss although the cluster autoscales (refused otherwise: an "
                            "autoscaler adds nodes in the lost zone for KubeRay's Pending replacements)")
        k.add_argument("--partition-method", choices=("networkpolicy", "node-filter"), default=None,
                       help="how a zone partition cuts a zone off (default node-filter: a helper pod with hostNetwork "
                            "and NET_ADMIN, checked with a dry-run create first; networkpolicy where admission refuses "
                            "it, its effect checked; see kuberay/README.md)")
        k.add_argument("--load-in-cluster", action="store_true", default=None,
                       help="run the load workers as a Kubernetes Job off the Ray cluster's nodes, where no fault "
                            "reaches them (kubernetes.load.in_cluster; default: processes of the rig)")
        k.add_argument("--load-image", default=None,
                       help="the load pods' image, with the rig's package installed (kubernetes.load.image; "
                            "default availproof:dev, kuberay/Dockerfile)")
    for c in (up, status, down, dep, run, su, demo, rec_, cap):
        c.add_argument("--cluster-dir", default=None, help="state directory (default: $AVAILPROOF_HOME/cluster)")
    return p
