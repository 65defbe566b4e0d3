"""The shipped dashboard against Grafana's published dashboard schema.

Grafana publishes its dashboard schema (CUE) as generated types in
`@grafana/grafana-foundation-sdk` (scripts/install-grafana-schema puts it and TypeScript in a
cache). The dashboard JSON becomes a TypeScript object literal typed by those types, so `tsc`
checks every field name, every enum value and every required field, panel options and field
config by panel type, and Prometheus targets by the Prometheus query schema.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.collector.otelcol import ROOT
from tests.conftest import unavailable

pytestmark = pytest.mark.slow

DASHBOARD = ROOT / "collector-config" / "grafana" / "dashboards" / "spanjudge.json"
INSTALL = ROOT / "scripts" / "install-grafana-schema"

# Mapped types over the SDK's types: JSON spells enums by value and has no methods (the SDK's
# variant markers); panel options and field config carry CUE defaults, which the generated types
# mark required, so those are optional here (their keys and values are still checked).
PRELUDE = """\
import type * as dashboard from "@grafana/grafana-foundation-sdk/dashboard";
import type * as prometheus from "@grafana/grafana-foundation-sdk/prometheus";
import type * as timeseries from "@grafana/grafana-foundation-sdk/timeseries";
import type * as bargauge from "@grafana/grafana-foundation-sdk/bargauge";
import type * as heatmap from "@grafana/grafana-foundation-sdk/heatmap";

type IsAny<T> = 0 extends 1 & T ? true : false;
type Fn = (...args: never[]) => unknown;
type Lit<T> = IsAny<T> extends true ? T
  : T extends Fn ? never
  : T extends string ? `${T}`
  : T extends number | boolean | null | undefined ? T
  : T extends readonly (infer U)[] ? Lit<U>[]
  : T extends object ? { [K in keyof T as T[K] extends Fn ? never : K]: Lit<T[K]> }
  : T;
type Loose<T> = IsAny<T> extends true ? T
  : T extends readonly (infer U)[] ? Loose<U>[]
  : T extends object ? { [K in keyof T]?: Loose<T[K]> }
  : T;
type Query = Lit<prometheus.dataquery>;
type Defaults<F> = Omit<Lit<dashboard.FieldConfig>, "custom"> & { custom?: Loose<Lit<F>> };
type FieldConfigOf<F> = Omit<Lit<dashboard.FieldConfigSource>, "defaults"> & {
  defaults: Defaults<F>;
};
type PanelOf<K extends string, O, F> = Omit<
  Lit<dashboard.Panel>, "type" | "targets" | "options" | "fieldConfig"
> & { type: K; targets?: Query[]; options?: Loose<Lit<O>>; fieldConfig?: FieldConfigOf<F> };
type AnyPanel =
  | PanelOf<"timeseries", timeseries.Options, timeseries.FieldConfig>
  | PanelOf<"bargauge", bargauge.Options, unknown>
  | PanelOf<"heatmap", heatmap.Options, heatmap.FieldConfig>;
type Row = Omit<Lit<dashboard.RowPanel>, "panels"> & { panels: AnyPanel[] };
export type Dash = Omit<Lit<dashboard.Dashboard>, "panels"> & { panels?: (AnyPanel | Row)[] };
"""


def _node_modules() -> Path:
    found = subprocess.run(
        [str(INSTALL), "--cached"], capture_output=True, text=True, check=False, timeout=30
    )
    lines = found.stdout.strip().splitlines()
    if found.returncode != 0 or not lines or shutil.which("node") is None:
        unavailable(
            "grafana-schema", "Grafana's schema types are not installed: run " + str(INSTALL)
        )
    return Path(lines[-1])


def _check(tmp: Path, dashboards: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """tsc over one .ts file per dashboard; returns the compiler's answer."""
    modules = _node_modules()
    (tmp / "node_modules").symlink_to(modules)
    (tmp / "schema.ts").write_text(PRELUDE, encoding="utf-8")
    for name, doc in dashboards.items():
        body = json.dumps(doc, indent=2)
        (tmp / f"{name}.ts").write_text(
            f'import type {{ Dash }} from "./schema.js";\n\nconst dashboard: Dash = {body};\n'
            "export default dashboard;\n",
            encoding="utf-8",
        )
    options = {
        "strict": True,
        "noEmit": True,
        "module": "node16",
        "moduleResolution": "node16",
        "target": "es2020",
        "skipLibCheck": True,
        "types": [],
    }
    files = ["schema.ts", *(f"{name}.ts" for name in dashboards)]
    (tmp / "tsconfig.json").write_text(json.dumps({"compilerOptions": options, "files": files}))
    return subprocess.run(
        ["node", str(modules / "typescript" / "bin" / "tsc"), "-p", str(tmp)],
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
        cwd=tmp,
        env={**os.environ, "NODE_OPTIONS": "--max-old-space-size=1024"},
    )


def test_dashboard_matches_grafanas_published_schema(tmp_path: Path) -> None:
    shipped = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    # The same check must reject what Grafana's schema does not allow.
    broken = copy.deepcopy(shipped)
    panel = next(p for p in broken["panels"] if p["type"] == "timeseries")
    panel["options"]["legend"] = {"displayMode": "sideways"}  # not a LegendDisplayMode
    panel["gridPos"]["depth"] = 1  # not a GridPos field
    broken["templating"]["list"][0]["current"] = {}  # a VariableOption needs text and value

    answer = _check(tmp_path, {"shipped": shipped, "broken": broken})
    errors = [line for line in answer.stdout.splitlines() if ": error TS" in line]
    assert not [e for e in errors if e.startswith("shipped.ts")], answer.stdout
    broken_errors = "\n".join(e for e in errors if e.startswith("broken.ts"))
    assert '"sideways"' in broken_errors, answer.stdout
    assert "depth" in broken_errors, answer.stdout
    assert "text, value" in broken_errors, answer.stdout
