"""The ``csibench`` command (also a kubectl plugin: ``kubectl csibench ...``).

``operator`` runs the operator; ``report``, ``compare``, ``watch`` and ``history`` read runs from the cluster
(``report --suite`` and ``compare --suite`` a BenchmarkSuite's: ``report/suite.py``); ``report``, ``compare`` and
``history`` with ``--from DIR`` read instead
what ``export`` wrote (``report/archive.py``: runs, a selector's or a suite's, kept as files);
``gate`` waits for a run's end and exits with its verdict (0 pass, 1 a threshold broken or a regression, 2 not
measured, 3 inconclusive: ``report/verdicts.py``); ``preflight`` checks the CSI machinery serving a class without
a run (exit 4 on a Warning, to gate a pipeline); ``crd`` prints the CRD generated from the models; ``schema``
the JSON Schema of the result (``api/report_schema.py``); ``docs-reference`` writes the documentation site's
reference pages (``reference.py``, from the models, reasons, metrics and this parser). Runs are named
``NAME`` (with ``-n NAMESPACE``) or ``NAMESPACE/NAME``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from csibench.api.collect import PROMETHEUS_ALLOW_LINK_LOCAL_ENV, PROMETHEUS_URL_ENV
from csibench.api.workload import DEFAULT_WORKLOAD_IMAGE, WORKLOAD_IMAGE_ENV

EXIT_NOT_FOUND = 2
EXIT_NOT_READY = 3
EXIT_PREFLIGHT_WARNINGS = 4
_ERROR = "an error, said on stderr (e.g. a report written by a newer csibench, -o html without csibench[report])"
# What each command's exit codes mean: the reference's command pages are generated from this and the parser
# (csibench docs-reference), and every command must be here.
EXIT_CODES: dict[str, dict[int, str]] = {
    "report": {0: "printed", 1: _ERROR, EXIT_NOT_FOUND: "no run (or suite) of that name, or none in --from DIR"},
    "compare": {0: "printed; with --max-regression: equivalent, better or only Slower",
                1: "with --max-regression: a regression (or Slower with --fail-on-slower); else " + _ERROR,
                EXIT_NOT_FOUND: "a run, suite or cell not found; with --max-regression: nothing measured to judge",
                EXIT_NOT_READY: "a run has not finished; with --max-regression: inconclusive"},
    "watch": {0: "the run ended (Succeeded or Failed)", EXIT_NOT_FOUND: "no run of that name"},
    "gate": {0: "pass", 1: "a threshold broken or a regression (or Slower with failOnSlower)",
             2: "the run failed to measure, cannot be read, or did not end within --timeout", 3: "inconclusive"},
    "history": {0: "printed", 1: _ERROR},
    "export": {0: "written", 1: _ERROR, EXIT_NOT_FOUND: "no run matches (or the suite is not found)"},
    "preflight": {0: "no Warning finding", EXIT_NOT_FOUND: "the StorageClass does not exist",
                  EXIT_PREFLIGHT_WARNINGS: "a Warning finding exists"},
    "operator": {0: "stopped", 2: "--prometheus-url is a link-local or metadata address without "
                                  "--allow-link-local-prometheus"},
    "crd": {0: "written"},
    "schema": {0: "written"},
    "docs-reference": {0: "written"},
}


class CliError(Exception):
    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def _split(run: str, namespace: str) -> tuple[str, str]:
    """'ns/name' -> (ns, name); 'name' -> (the -n namespace, name)."""
    explicit, _, name = run.rpartition("/")
    return (explicit or namespace, name)


def _fetch(args: argparse.Namespace, *runs: str) -> list[dict[str, Any]]:
    """Read runs through the same rate-limited client the operator uses (in its threads, not on a loop); with
    ``--from DIR``, from an export instead (``report/archive.py``)."""
    if getattr(args, "from_dir", None):
        return [_archived(args, run).run for run in runs]
    from csibench.kube.client import KubeClient, load_configuration
    from csibench.kube.resources import BENCHMARK_RUNS

    async def fetch() -> list[dict[str, Any] | None]:
        client = KubeClient(load_configuration(args.kubeconfig), qps=20, burst=40, max_in_flight=2)
        try:
            return [await client.get(BENCHMARK_RUNS.path(*_split(run, args.namespace))) for run in runs]
        finally:
            await client.close()

    found = asyncio.run(fetch())
    missing = [run for run, obj in zip(runs, found, strict=True) if obj is None]
    if missing:
        names = ", ".join("/".join(_split(run, args.namespace)) for run in missing)
        raise CliError(f"BenchmarkRun {names} not found", EXIT_NOT_FOUND)
    return [obj for obj in found if obj is not None]


def _archived(args: argparse.Namespace, run: str) -> Any:
    from csibench.report.archive import ArchiveError, find_run

    try:
        return find_run(Path(args.from_dir), *_split(run, args.namespace))
    except ArchiveError as error:
        raise CliError(str(error), EXIT_NOT_FOUND) from None


def _fetch_suite(args: argparse.Namespace, suite: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    """A BenchmarkSuite and its runs (the BenchmarkRuns labelled with its uid, in its namespace); None: no
    suite of that name."""
    from csibench.api.suite import SUITE_UID_LABEL
    from csibench.kube.client import KubeClient, load_configuration
    from csibench.kube.resources import BENCHMARK_RUNS, BENCHMARK_SUITES
    from csibench.preflight.discovery import list_all
    from csibench.suite.children import owned_by

    namespace, name = _split(suite, args.namespace)

    async def fetch() -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        client = KubeClient(load_configuration(args.kubeconfig), qps=20, burst=40, max_in_flight=2)
        try:
            found = await client.get(BENCHMARK_SUITES.path(namespace, name))
            if found is None:
                return None
            uid = (found.get("metadata") or {}).get("uid") or ""
            runs = await list_all(client, BENCHMARK_RUNS.path(namespace), {"labelSelector": f"{SUITE_UID_LABEL}={uid}"})
            # The suite's own only, as its controller counts them: owned by it and named as one of its runs (a
            # copy of a run's manifest keeps the label, not the owner reference or a name the suite gave).
            names = {run.get("name") for run in (found.get("status") or {}).get("runs") or []}
            return found, [run for run in runs if owned_by(run, uid) and run["metadata"]["name"] in names]
        finally:
            await client.close()

    return asyncio.run(fetch())


def _report(args: argparse.Namespace) -> int:
    from csibench.report.render import render_json, render_markdown, render_table

    if (args.suite is None) == (args.run is None):
        raise CliError("name one run or suite: csibench report NAME, or csibench report --suite NAME")
    if args.suite is not None and args.from_dir:
        raise CliError("--from reads exported runs; a suite's report reads the cluster")
    if args.suite is not None:
        return _report_suite(args, args.suite)
    try:
        (run,) = _fetch(args, args.run)
    except CliError as error:  # no run of that name: a suite's, perhaps
        if error.code != EXIT_NOT_FOUND or args.from_dir:
            raise
        return _report_suite(args, args.run, "BenchmarkRun or BenchmarkSuite")
    if args.output == "html":
        sys.stdout.write(_html(lambda html: html.build_run_html(run, _load_report(args, run))))
    elif args.output == "json":
        sys.stdout.write(render_json(run, _load_report(args, run)))
    elif args.output == "markdown":
        sys.stdout.write(render_markdown(run))
    elif args.output == "junit":
        from csibench.report.verdicts import junit

        sys.stdout.write(junit(run))
    elif args.output == "csv":
        from csibench.report.csv_tables import RUN_TABLES, run_table, to_csv

        table = args.table or "steps"
        if table not in RUN_TABLES:
            raise CliError(f"--table {table} is a suite's; a run's tables are {', '.join(RUN_TABLES)}")
        sys.stdout.write(to_csv(*run_table(run, table)))
    else:
        sys.stdout.write(render_table(run))
    return 0


def _report_suite(args: argparse.Namespace, name: str, sought: str = "BenchmarkSuite") -> int:
    """A suite's report (``report/suite.py``); no suite of that name: exit 2, saying what was sought."""
    import json

    from csibench.report.suite import render_suite, suite_json

    found = _fetch_suite(args, name)
    if found is None:
        raise CliError(f"{sought} {'/'.join(_split(name, args.namespace))} not found", EXIT_NOT_FOUND)
    suite, runs = found
    percent, alpha = args.max_regression, args.alpha
    if args.output == "junit":
        raise CliError("-o junit is a run's; a suite's report is table, markdown, json or html")
    if args.output == "html":
        sys.stdout.write(_html(lambda html: html.build_suite_html(suite, runs, percent, alpha)))
    elif args.output == "csv":
        from csibench.report.csv_tables import cells_table, to_csv

        if (args.table or "cells") != "cells":
            raise CliError(f"--table {args.table} is a run's; a suite's CSV table is cells")
        sys.stdout.write(to_csv(*cells_table(suite_json(suite, runs, alpha=alpha, max_regression_percent=percent))))
    elif args.output == "json":
        body = suite_json(suite, runs, alpha=alpha, max_regression_percent=percent)
        sys.stdout.write(json.dumps(body, indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(render_suite(suite, runs, markdown=args.output == "markdown", alpha=alpha,
                                      max_regression_percent=percent))
    return 0


def _html(build: Any) -> str:
    """Render with the optional plotting extra; without it, say how to install it (exit 1)."""
    from csibench.report import html
    from csibench.report.plots import PlottingUnavailable

    try:
        text: str = build(html)
    except PlottingUnavailable as error:
        raise CliError(str(error)) from None
    return text


def _load_report(args: argparse.Namespace, run: dict[str, Any]) -> dict[str, Any] | None:
    from csibench.engine.report_store import load_report
    from csibench.kube.client import KubeClient, load_configuration

    if getattr(args, "from_dir", None):
        from csibench.api.stored_report import ReportTooNew

        meta = run["metadata"]
        try:
            report: dict[str, Any] | None = _archived(args, f"{meta['namespace']}/{meta['name']}").report()
        except ReportTooNew as error:
            raise CliError(str(error)) from None
        return report
    name = (run.get("status") or {}).get("reportConfigMap")
    if not name:
        return None

    async def load() -> dict[str, Any] | None:
        client = KubeClient(load_configuration(args.kubeconfig), qps=20, burst=40, max_in_flight=2)
        try:
            return await load_report(client, run["metadata"]["namespace"], name)
        finally:
            await client.close()

    return _readable(asyncio.run(load()), f"the report of {run['metadata']['namespace']}/{run['metadata']['name']}")


def _readable(report: dict[str, Any] | None, what: str) -> dict[str, Any] | None:
    """A report of a version this csibench reads; a newer one is a clear error (exit 1), not a misreading."""
    from csibench.api.stored_report import ReportTooNew, readable

    try:
        return None if report is None else readable(report, what)
    except ReportTooNew as error:
        raise CliError(str(error)) from None


def _compare(args: argparse.Namespace) -> int:
    from csibench.report.compare import CompareError, render_compare

    if args.suite is not None and args.from_dir:
        raise CliError("--from reads exported runs; comparing a suite's cells reads the cluster")
    try:
        run_a, run_b = _suite_cells(args) if args.suite is not None else _fetch(args, args.run_a, args.run_b)
        if args.output == "html" and args.suite is not None:  # a cell is its rounds: no one stored report
            sys.stdout.write(_html(lambda html: html.build_compare_html(run_a, None, run_b, None)))
        elif args.output == "html":
            sys.stdout.write(_html(lambda html: html.build_compare_html(
                run_a, _load_report(args, run_a), run_b, _load_report(args, run_b))))
        else:
            sys.stdout.write(render_compare(run_a, run_b, markdown=args.output == "markdown", alpha=args.alpha))
    except CompareError as error:  # with --max-regression: nothing measured to judge (the gate's exit 2)
        raise CliError(str(error), EXIT_NOT_READY if args.max_regression is None else 2) from None
    if args.max_regression is None:
        return 0
    from csibench.api.baseline import compare_with_baseline, fails
    from csibench.report.verdicts import EXIT_BROKEN, EXIT_INCONCLUSIVE

    comparison = compare_with_baseline(run_a, run_b, args.max_regression, alpha=args.alpha,
                                       fail_on_slower=args.fail_on_slower)
    lines = [f"regression check, B against A: {comparison.change}",
             *([f"  shapes differ: {', '.join(comparison.shapeDifferences)}"] if comparison.shapeDifferences else []),
             *[f"  {row.message}" for row in comparison.rows]]
    if not comparison.rows:
        lines.append(f"  {comparison.message}")
    (sys.stderr if args.output == "html" else sys.stdout).write("\n".join(lines) + "\n")
    return {True: EXIT_BROKEN, None: EXIT_INCONCLUSIVE, False: 0}[fails(comparison.change, comparison.failOnSlower)]


def _suite_cells(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """``compare --suite NAME CELL_A CELL_B``: the two cells as runs (medians over the rounds, the rounds as the
    iterations); an unknown cell: exit 2, listing the suite's cells."""
    from csibench.report.suite import UnknownCell, cell_runs

    found = _fetch_suite(args, args.suite)
    if found is None:
        raise CliError(f"BenchmarkSuite {'/'.join(_split(args.suite, args.namespace))} not found", EXIT_NOT_FOUND)
    try:
        return cell_runs(*found, args.run_a, args.run_b)
    except UnknownCell as error:
        raise CliError(str(error), EXIT_NOT_FOUND) from None


def _watch(args: argparse.Namespace) -> int:
    from csibench.report.render import render_table

    interactive = sys.stdout.isatty()
    last = ""
    while True:
        (run,) = _fetch(args, args.run)
        text = render_table(run)
        if text != last:
            sys.stdout.write(("\033[H\033[2J" if interactive else "\n") + text)
            sys.stdout.flush()
            last = text
        if (run.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return 0
        time.sleep(args.interval)


def _history(args: argparse.Namespace) -> int:
    """Finished runs matching a label selector, of the latest one's shape, oldest first (``report/history.py``)."""
    from csibench.report import history
    from csibench.report.render import align, markdown_table

    if args.from_dir:
        from csibench.report.archive import ArchiveError, select_runs

        try:
            found = select_runs(Path(args.from_dir), args.selector, None if args.all_namespaces else args.namespace)
        except ArchiveError as error:
            raise CliError(str(error)) from None
    else:
        found = _list_runs(args, args.selector)
    series = history.select(found)
    threshold = args.max_regression / 100.0
    if args.output == "html":
        sys.stdout.write(_html(lambda html: html.build_history_html(series, args.window, threshold)))
        return 0
    headers, rows, notes = history.table(series, args.window, threshold)
    lines = markdown_table(headers, rows) if args.output == "markdown" else align(headers, rows)
    sys.stdout.write("\n".join([*lines, "", *notes]) + "\n")
    return 0


def _export(args: argparse.Namespace) -> int:
    """Each run's stored report, run object, JUnit, CSV tables and (with the plotting extra) HTML page into
    DIR/<completionTime>-<namespace>-<name>/ (``report/archive.py``)."""
    from csibench.report.archive import write_run
    from csibench.report.plots import PlottingUnavailable

    *names, directory = args.targets
    if sum((bool(names), bool(args.selector), bool(args.suite))) != 1:
        raise CliError("name the runs, a selector or a suite: csibench export RUN [RUN...] DIR, csibench export -l "
                       "SELECTOR DIR, or csibench export --suite NAME DIR")
    if args.suite:
        found = _fetch_suite(args, args.suite)
        if found is None:
            raise CliError(f"BenchmarkSuite {'/'.join(_split(args.suite, args.namespace))} not found", EXIT_NOT_FOUND)
        runs = found[1]
    else:
        runs = _fetch(args, *names) if names else _list_runs(args, args.selector)
    if not runs:
        raise CliError(f"no BenchmarkRun matches {args.selector or args.suite}", EXIT_NOT_FOUND)
    no_html = ""
    for run in runs:
        report = _load_report(args, run)
        html = None
        if not no_html:
            from csibench.report import html as html_report

            try:
                html = html_report.build_run_html(run, report)
            except PlottingUnavailable as error:
                no_html = str(error)
        print(write_run(Path(directory), run, report, html))
    if no_html:
        print(f"csibench: no report.html: {no_html}", file=sys.stderr)
    return 0


def _list_runs(args: argparse.Namespace, selector: str) -> list[dict[str, Any]]:
    from csibench.kube.client import KubeClient, load_configuration
    from csibench.kube.resources import BENCHMARK_RUNS
    from csibench.preflight.discovery import list_all

    async def fetch() -> list[dict[str, Any]]:
        client = KubeClient(load_configuration(args.kubeconfig), qps=20, burst=40, max_in_flight=2)
        try:
            return await list_all(client, BENCHMARK_RUNS.path(None if args.all_namespaces else args.namespace),
                                  {"labelSelector": selector})
        finally:
            await client.close()

    return asyncio.run(fetch())


def _window(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 2:
        raise argparse.ArgumentTypeError("the window needs at least 2 runs to be tested")
    return value


def _percent(text: str) -> float:
    """'10%' or '10' -> 10.0 (a percent above 0)."""
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a percentage: {text!r}") from None
    if not 1 <= value <= 1000:  # as spec.regressionThresholdPercent
        raise argparse.ArgumentTypeError(f"a percentage from 1 to 1000, not {text!r}")
    return value


def _gate(args: argparse.Namespace) -> int:
    """Wait for the run's end (``--timeout`` seconds at most), print its verdict and exit with it; with
    ``--junit FILE`` also write the JUnit document. A run that is missing or does not end in time measured
    nothing a pipeline can rely on: exit 2."""
    from kubernetes.config.config_exception import ConfigException

    from csibench.api.baseline import compare_with_baseline
    from csibench.kube.client import ApiError
    from csibench.report.verdicts import EXIT_NOT_MEASURED, TERMINAL, gate, junit

    deadline = time.monotonic() + args.timeout
    while True:
        try:
            (run,) = _fetch(args, args.run)
        except CliError as error:
            raise CliError(str(error), EXIT_NOT_MEASURED) from None
        except (ApiError, ConfigException, OSError) as error:  # the API cannot be read: nothing is known
            raise CliError(f"cannot read run {args.run}: {error}", EXIT_NOT_MEASURED) from None
        phase = (run.get("status") or {}).get("phase")
        if phase in TERMINAL:
            break
        if time.monotonic() > deadline:
            raise CliError(f"run {args.run} did not end within {args.timeout:g} s (phase {phase or 'Pending'}, "
                           f"step {(run.get('status') or {}).get('currentStep') or '-'})", EXIT_NOT_MEASURED)
        time.sleep(args.interval)
    comparison = None
    if args.baseline:
        try:
            (baseline,) = _fetch(args, args.baseline)
        except (CliError, ApiError, ConfigException, OSError) as error:
            raise CliError(f"cannot read baseline {args.baseline}: {error}", EXIT_NOT_MEASURED) from None
        comparison = compare_with_baseline(baseline, run, args.max_regression, fail_on_slower=args.fail_on_slower
                                           ).model_dump(mode="json", exclude_none=True)
        run.setdefault("status", {})["baseline"] = comparison  # the JUnit document has its rows too
    result = gate(run, comparison)
    if args.junit:
        Path(args.junit).write_text(junit(run))
    sys.stdout.write("\n".join(result.lines) + "\n")
    return result.code


def _preflight(args: argparse.Namespace) -> int:
    """The run's preflight without a run: the same discovery and checks, printed; exit 4 on a Warning."""
    import json

    from pydantic import ValidationError

    from csibench.api.models import BenchmarkRunSpec, Severity
    from csibench.engine.errors import PlanError
    from csibench.engine.plan import resolve_steps
    from csibench.kube.client import KubeClient, load_configuration
    from csibench.kube.resources import STORAGE_CLASSES
    from csibench.preflight.discovery import Preflight, run_preflight
    from csibench.report.machinery import finding_lines, machinery_lines

    try:
        spec = BenchmarkRunSpec(storageClassName=args.storage_class, volumeSnapshotClassName=args.snapshot_class,
                                volumes=args.volumes, pvcsPerPod=args.pvcs_per_pod)
        steps = [step.name for step in resolve_steps(spec)]
    except (ValidationError, PlanError) as error:
        raise CliError(str(error)) from None

    async def check() -> Preflight | None:
        client = KubeClient(load_configuration(args.kubeconfig), qps=20, burst=40, max_in_flight=2)
        try:
            storage_class = await client.get(STORAGE_CLASSES.path(name=args.storage_class))
            return None if storage_class is None else await run_preflight(client, spec, steps, storage_class)
        finally:
            await client.close()

    from csibench.kube.client import ApiError
    try:
        found = asyncio.run(check())
    except ApiError as error:
        raise CliError(f"preflight could not read the cluster: {error}") from None
    if found is None:
        raise CliError(f"StorageClass {args.storage_class!r} not found", EXIT_NOT_FOUND)
    if args.output == "json":
        sys.stdout.write(json.dumps({"machinery": found.machinery.model_dump(mode="json"),
                                     "schedulableNodes": found.schedulable_nodes,
                                     "findings": [f.model_dump(mode="json") for f in found.findings]}, indent=2) + "\n")
    else:
        lines = machinery_lines({"machinery": found.machinery.model_dump(mode="json")})
        lines += [f"steps checked: {', '.join(steps)} with {args.volumes} volumes"]
        lines += finding_lines([f.model_dump(mode="json") for f in found.findings]) or ["preflight: no finding"]
        sys.stdout.write("\n".join(lines) + "\n")
    warnings = [f for f in found.findings if f.severity == Severity.WARNING]
    return EXIT_PREFLIGHT_WARNINGS if warnings else 0


def _operator(args: argparse.Namespace) -> int:
    import kopf

    import csibench.handlers  # noqa: F401 - registers the handlers with kopf
    from csibench.handlers import DELETE_CLEANUP_ENV
    from csibench.metrics import serve

    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    namespaces = args.namespace or []
    if args.workload_image:  # the data path's default image; the engine reads it where runs are planned
        os.environ[WORKLOAD_IMAGE_ENV] = args.workload_image
    if args.prometheus_url:  # spec.collect's default Prometheus; the engine reads it where a run starts
        from csibench.api.collect import forbidden_prometheus_host

        problem = forbidden_prometheus_host(args.prometheus_url)
        if problem is not None and not args.allow_link_local_prometheus:
            print(f"csibench operator: --prometheus-url: {problem}; add --allow-link-local-prometheus if this "
                  "Prometheus really is there", file=sys.stderr)
            return 2
        os.environ[PROMETHEUS_URL_ENV] = args.prometheus_url
        if args.allow_link_local_prometheus:
            os.environ[PROMETHEUS_ALLOW_LINK_LOCAL_ENV] = "true"
    if args.deleted_run_cleanup_seconds is not None:  # the delete handler reads it when a run is deleted
        os.environ[DELETE_CLEANUP_ENV] = str(args.deleted_run_cleanup_seconds)
    serve(args.metrics_port)
    kopf.run(standalone=True, clusterwide=not namespaces, namespaces=namespaces,
             liveness_endpoint=f"http://0.0.0.0:{args.health_port}/healthz")
    return 0


def _crd(args: argparse.Namespace) -> int:
    from csibench.api.crd import render_crd

    text = render_crd(args.kind)
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def _schema(args: argparse.Namespace) -> int:
    from csibench.api.report_schema import render_report_schema

    text = render_report_schema()
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def _docs_reference(args: argparse.Namespace) -> int:
    from csibench.reference import render_reference

    directory = Path(args.output)
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in render_reference(build_parser(), EXIT_CODES).items():
        (directory / name).write_text(text)
    return 0


def _prometheus_url(text: str) -> str:
    from csibench.api.collect import PROMETHEUS_URL_PATTERN

    if len(text) > 256 or re.fullmatch(PROMETHEUS_URL_PATTERN, text) is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not an http(s) URL of a Prometheus (scheme, host, optional "
                                         "port and path; no user, query or fragment)")
    return text


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds in (0, 3600]")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="csibench", description="Benchmark CSI storage with BenchmarkRuns.")
    commands = parser.add_subparsers(dest="command", required=True)

    def reader(name: str, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("-n", "--namespace", default="default", help="namespace of the run(s)")
        sub.add_argument("--kubeconfig", default=None, help="kubeconfig (default: KUBECONFIG or in-cluster)")
        return sub

    report = reader("report", "print a run's step table with per-object latency percentiles, or a suite's "
                              "scaling tables and comparisons")
    report.add_argument("run", nargs="?", default=None,
                        help="NAME or NAMESPACE/NAME of a BenchmarkRun; when no run has that name, the "
                             "BenchmarkSuite of that name is reported")
    report.add_argument("--suite", default=None, metavar="NAME",
                        help="report a BenchmarkSuite (NAME or NAMESPACE/NAME): its runs, per step a table and curve "
                             "of the cells' medians over the rounds, and the cells compared along each axis")
    report.add_argument("-o", "--output", choices=["table", "json", "markdown", "html", "junit", "csv"],
                        default="table",
                        help="html: one self-contained page with plots (needs csibench[report]); junit: a testcase "
                             "per step, workload, database run and threshold (runs only); csv: one table (--table)")
    report.add_argument("--table", choices=["steps", "datapath", "database", "baseline", "cells"], default=None,
                        help="with -o csv: which table (a run's steps (default), datapath, database or baseline; "
                             "a suite's cells)")
    report.add_argument("--max-regression", type=_percent, default=10.0,
                        help="a suite's comparisons: a change beyond this, e.g. 10%%, and significant is a "
                             "Regression or Improvement (default 10%%)")
    report.add_argument("--alpha", type=float, default=0.05,
                        help="a suite's comparisons: the significance level (default 0.05)")
    report.add_argument("--from", dest="from_dir", default=None, metavar="DIR",
                        help="read the run from a directory csibench export wrote, not the cluster")
    report.set_defaults(func=_report)
    compare = reader("compare", "two finished runs (or two cells of a suite) side by side, with the per-step "
                                "speed-up of B over A")
    compare.add_argument("run_a", help="baseline run (A); with --suite, a cell id (c0)")
    compare.add_argument("run_b", help="run compared with it (B); with --suite, a cell id (c2)")
    compare.add_argument("--suite", default=None, metavar="NAME",
                         help="compare two cells of this BenchmarkSuite: each its medians over the rounds, the "
                              "rounds as its iterations (csibench compare --suite NAME c0 c2)")
    compare.add_argument("-o", "--output", choices=["table", "markdown", "html"], default="table",
                         help="html: the table and both runs' latency distributions overlaid per step")
    compare.add_argument("--alpha", type=float, default=0.05,
                         help="significance level of the per-step test for repeated runs (default 0.05)")
    compare.add_argument("--max-regression", type=_percent, default=None,
                         help="also judge B against A: exit 1 on a regression (shown beyond this, e.g. 10%%, by a "
                              "one-sided test), 3 when inconclusive, 0 when equivalent, better or only Slower")
    compare.add_argument("--fail-on-slower", action="store_true",
                         help="with --max-regression: exit 1 also when B is significantly slower but not shown "
                              "beyond the threshold (Slower)")
    compare.add_argument("--from", dest="from_dir", default=None, metavar="DIR",
                         help="read both runs from a directory csibench export wrote, not the cluster")
    compare.set_defaults(func=_compare)
    watch = reader("watch", "live progress per step until the run ends")
    watch.add_argument("run", help="NAME or NAMESPACE/NAME")
    watch.add_argument("--interval", type=float, default=1.0)
    watch.set_defaults(func=_watch)
    gate_parser = reader("gate", "wait for a run's end and exit with its verdict: 0 pass, 1 a threshold broken or "
                                 "a regression, 2 the run failed to measure (or cannot be read), 3 inconclusive")
    gate_parser.add_argument("run", help="NAME or NAMESPACE/NAME")
    gate_parser.add_argument("--timeout", type=float, default=24 * 3600.0,
                             help="seconds to wait for the run's end (default a day); past it, exit 2")
    gate_parser.add_argument("--interval", type=float, default=2.0, help="seconds between reads of the run")
    gate_parser.add_argument("--junit", default=None, help="also write the run's JUnit XML to this file")
    gate_parser.add_argument("--baseline", default=None,
                             help="compare with this finished run (NAME or NAMESPACE/NAME) instead of spec.baseline")
    gate_parser.add_argument("--max-regression", type=_percent, default=10.0,
                             help="with --baseline: the regression threshold, e.g. 10%% (default 10%%)")
    gate_parser.add_argument("--fail-on-slower", action="store_true",
                             help="with --baseline: fail also on Slower (significantly slower, not shown beyond "
                                  "the threshold), as spec.failOnSlower")
    gate_parser.set_defaults(func=_gate)

    history_parser = reader("history", "finished runs matching a selector, oldest first: per step throughput and "
                                       "p99 over time, and a change point when the latest runs differ")
    history_parser.add_argument("-l", "--selector", required=True, help="label selector, e.g. pipeline=release")
    history_parser.add_argument("-A", "--all-namespaces", action="store_true", help="runs in every namespace")
    history_parser.add_argument("--window", type=_window, default=3,
                                help="latest runs tested against the ones before (at least 2)")
    history_parser.add_argument("--max-regression", type=_percent, default=10.0,
                                help="a change smaller than this is not marked (default 10%%)")
    history_parser.add_argument("-o", "--output", choices=["table", "markdown", "html"], default="table")
    history_parser.add_argument("--from", dest="from_dir", default=None, metavar="DIR",
                                help="read the runs from a directory csibench export wrote, not the cluster")
    history_parser.set_defaults(func=_history)
    export = reader("export", "write runs' stored reports, run objects, JUnit, CSV and HTML into "
                              "DIR/<completionTime>-<namespace>-<name>/, to keep them beyond the cluster")
    export.add_argument("targets", nargs="+", metavar="RUN... DIR",
                        help="runs (NAME or NAMESPACE/NAME), then the directory; with -l, only the directory")
    export.add_argument("-l", "--selector", default=None, help="export the runs matching this label selector")
    export.add_argument("-A", "--all-namespaces", action="store_true", help="with -l: runs in every namespace")
    export.add_argument("--suite", default=None, metavar="NAME", help="export this BenchmarkSuite's runs")
    export.set_defaults(func=_export, from_dir=None)

    preflight = commands.add_parser("preflight", help="check the CSI machinery serving a class without a run "
                                                      "(exit 4 when a Warning finding exists)")
    preflight.add_argument("--storage-class", required=True, help="StorageClass to check")
    preflight.add_argument("--snapshot-class", default=None, help="VolumeSnapshotClass (adds the snapshot steps)")
    preflight.add_argument("--volumes", type=int, default=10, help="batch size the checks assume")
    preflight.add_argument("--pvcs-per-pod", type=int, default=1, help="PVCs per publish pod the checks assume")
    preflight.add_argument("--kubeconfig", default=None, help="kubeconfig (default: KUBECONFIG or in-cluster)")
    preflight.add_argument("-o", "--output", choices=["text", "json"], default="text")
    preflight.set_defaults(func=_preflight)

    operator = commands.add_parser("operator", help="run the operator (in-cluster or with KUBECONFIG)")
    operator.add_argument("--namespace", action="append", help="watch only this namespace (repeatable)")
    operator.add_argument("--health-port", type=int, default=8081, help="liveness endpoint port")
    operator.add_argument("--metrics-port", type=int, default=8080, help="Prometheus /metrics port")
    operator.add_argument("--workload-image", default=None,
                          help=f"default image of data-path and database pods (else ${WORKLOAD_IMAGE_ENV}, "
                               f"else {DEFAULT_WORKLOAD_IMAGE}); spec.dataPath.image and spec.database.image "
                               "override it per run")
    operator.add_argument("--prometheus-url", type=_prometheus_url, default=None,
                          help="Prometheus that runs with spec.collect ask (e.g. http://prometheus.monitoring:9090); "
                               "spec.collect.prometheusUrl overrides it per run")
    operator.add_argument("--allow-link-local-prometheus", action="store_true",
                          help="let --prometheus-url (never a run's spec.collect.prometheusUrl) be a link-local or "
                               "cloud metadata address")
    operator.add_argument("--deleted-run-cleanup-seconds", type=_positive_seconds, default=None,
                          help="how long the cleanup of a deleted run waits for its objects to go before a Warning "
                               "event names what is left and the run is released (default 50)")
    operator.add_argument("--verbose", action="store_true")
    operator.set_defaults(func=_operator)
    crd = commands.add_parser("crd", help="print a CRD generated from the models (BenchmarkRun by default)")
    crd.add_argument("--kind", choices=["BenchmarkRun", "BenchmarkSuite", "BenchmarkSchedule"], default="BenchmarkRun")
    crd.add_argument("-o", "--output", help="write to this file instead of stdout")
    crd.set_defaults(func=_crd)
    schema = commands.add_parser("schema", help="print the JSON Schema of the result (report -o json and the "
                                                "stored report), generated from the models")
    schema.add_argument("-o", "--output", help="write to this file instead of stdout")
    schema.set_defaults(func=_schema)
    reference = commands.add_parser("docs-reference", help="write the documentation site's reference pages (fields, "
                                                           "conditions, metrics, commands), generated from the code")
    reference.add_argument("-o", "--output", required=True, metavar="DIR", help="directory, e.g. docs/reference")
    reference.set_defaults(func=_docs_reference)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result: int = args.func(args)
    except CliError as error:
        print(f"csibench: {error}", file=sys.stderr)
        return error.code
    except KeyboardInterrupt:
        return 130
    return result


if __name__ == "__main__":
    raise SystemExit(main())
