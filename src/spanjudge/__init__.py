"""spanjudge: judge AI agents from their OpenTelemetry traces.

The public API (ARCHITECTURE.md section 13)::

    from spanjudge import SpanJudgeProcessor, load_config
    provider.add_span_processor(SpanJudgeProcessor(load_config("spanjudge.yaml"),
                                                   tracer_provider=provider))

Names are imported on first use (PEP 562), so `import spanjudge` stays cheap: the agent process
and `spanjudge eval` pay only for what they touch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spanjudge._version import __version__

if TYPE_CHECKING:
    from spanjudge.config import Config, load_config, parse_config
    from spanjudge.emit.base import Sink
    from spanjudge.emit.collecting import CollectingSink
    from spanjudge.emit.metrics import score_views
    from spanjudge.engine import Engine
    from spanjudge.errors import ConfigError, InputError, JudgeError, SpanJudgeError
    from spanjudge.evaluators.base import EvaluationContext, Evaluator
    from spanjudge.judges.base import Judge, Judgement, JudgeRequest
    from spanjudge.processor import SpanJudgeProcessor
    from spanjudge.quickstart import Telemetry, configure_opentelemetry
    from spanjudge.recognition.base import Recogniser
    from spanjudge.values import Coverage, Expectation, SessionResult, Target, Verdict

# public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "SpanJudgeProcessor": "spanjudge.processor",
    "configure_opentelemetry": "spanjudge.quickstart",
    "Telemetry": "spanjudge.quickstart",
    "Config": "spanjudge.config",
    "load_config": "spanjudge.config",
    "parse_config": "spanjudge.config",
    "score_views": "spanjudge.emit.metrics",
    "Engine": "spanjudge.engine",
    "Verdict": "spanjudge.values",
    "Target": "spanjudge.values",
    "Expectation": "spanjudge.values",
    "Coverage": "spanjudge.values",
    "SessionResult": "spanjudge.values",
    "Evaluator": "spanjudge.evaluators.base",
    "EvaluationContext": "spanjudge.evaluators.base",
    "Recogniser": "spanjudge.recognition.base",
    "Judge": "spanjudge.judges.base",
    "JudgeRequest": "spanjudge.judges.base",
    "Judgement": "spanjudge.judges.base",
    "Sink": "spanjudge.emit.base",
    "CollectingSink": "spanjudge.emit.collecting",
    "SpanJudgeError": "spanjudge.errors",
    "ConfigError": "spanjudge.errors",
    "InputError": "spanjudge.errors",
    "JudgeError": "spanjudge.errors",
}

__all__ = [  # the same names as _EXPORTS (a test keeps them equal), spelled out for linters
    "CollectingSink",
    "Config",
    "ConfigError",
    "Coverage",
    "Engine",
    "EvaluationContext",
    "Evaluator",
    "Expectation",
    "InputError",
    "Judge",
    "JudgeError",
    "JudgeRequest",
    "Judgement",
    "Recogniser",
    "SessionResult",
    "Sink",
    "SpanJudgeError",
    "SpanJudgeProcessor",
    "Target",
    "Telemetry",
    "Verdict",
    "__version__",
    "configure_opentelemetry",
    "load_config",
    "parse_config",
    "score_views",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'spanjudge' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next access skips this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
