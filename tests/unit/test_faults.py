"""Errors are never silent: every broad ``except`` of the runtime logs (without prompt text),
counts or re-raises (scripts/broad_excepts.py), and the core's absorbed faults go through
:func:`sjf_core._faults.note_fault`."""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

from sjf_core._faults import fault_counts, note_fault
from sjf_core.policy._policies import SJFTokensPolicy, make_policy
from sjf_core.settings import Fairness
from sjf_core.predict._prediction import Prediction

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("broad_excepts", ROOT / "scripts" / "broad_excepts.py")
broad_excepts = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(broad_excepts)

def test_no_silent_broad_except_in_the_runtime():
    silent = [f"{path}:{line}" for path, line, verdict in broad_excepts.broad_handlers(ROOT / "src") if verdict is None]
    assert silent == []


def test_the_checker_flags_a_silent_handler_and_accepts_the_accounted_ones(tmp_path):
    pkg = tmp_path / "sjf_core"
    pkg.mkdir()
    (pkg / "m.py").write_text(
        "def a():\n    try:\n        f()\n    except Exception:\n        pass\n"
        "def b():\n    try:\n        f()\n    except (ValueError, BaseException):\n        return None\n"
        "def c():\n    try:\n        f()\n    except Exception:\n        log.warning('x')\n"
        "def d():\n    try:\n        f()\n    except Exception:\n        n += 1\n"
        "def e():\n    try:\n        f()\n    except Exception:\n        raise\n"
        "def g():\n    try:\n        f()\n    except ValueError:\n        pass\n")
    found = {line: verdict for _, line, verdict in broad_excepts.broad_handlers(tmp_path)}
    assert found == {4: None, 9: None, 14: "logs", 19: "counts", 24: "raises"}
    (pkg / "n.py").write_text("def h():\n    try:\n        f()\n    except Exception as exc:\n        why = exc\n")
    assert [v for p, _, v in broad_excepts.broad_handlers(tmp_path) if p.endswith("n.py")] == ["passes on"]


def test_note_fault_logs_type_and_place_never_the_message_and_counts(caplog):
    log = logging.getLogger("sjf_core.test_faults")
    secret = "my prompt text"
    with caplog.at_level(logging.DEBUG, logger="sjf_core.test_faults"):
        for _ in range(3):
            try:
                raise ValueError(secret)
            except ValueError:
                note_fault(log, "test fault; going on")
    assert secret not in caplog.text
    assert [r.levelno for r in caplog.records] == [logging.WARNING, logging.DEBUG, logging.DEBUG]
    assert "ValueError at test_faults.py:" in caplog.records[0].getMessage()
    assert fault_counts()["test fault; going on (ValueError)"] == 3


class BrokenKey(SJFTokensPolicy):
    name = "broken"

    def key(self, prediction, meta):
        raise RuntimeError("broken key")


def test_a_policy_key_failure_is_unscored_and_logged_not_silent(caplog):
    policy = BrokenKey()
    with caplog.at_level(logging.WARNING, logger="sjf_core.policy"):
        entry = policy.make_entry(0, 0.0, Prediction.from_probs([0.2, 0.3, 0.5]))
        plain = make_policy("sjf-tokens").make_entry(1, 0.0, None)  # unscored by design: no fault, no log
    assert entry.fallback and plain.fallback
    assert [r.name for r in caplog.records] == ["sjf_core.policy"] and "RuntimeError" in caplog.text


def test_a_tenant_that_cannot_be_read_is_logged(caplog):
    class Body(dict):
        def get(self, *a):
            raise RuntimeError("unreadable body")

    with caplog.at_level(logging.WARNING, logger="sjf_core.policy"):
        assert Fairness.parse("user").tenant(Body(), None) is None
    assert "shared tenant" in caplog.text and "unreadable body" not in caplog.text
