"""``feedback-sync check``: the configuration tested without a sync.

One line per check, with what to fix where one fails:

- ``settings``: the source's settings resolve and validate (the settings files parse: the
  command line checks that before any command);
- ``api``: one authenticated request (``GET /statuses?limit=1``, the smallest listing);
- ``warehouse``: the destination can be written (``Target.check_writable``: a DuckDB file
  opened for writing, or the folder it will be made in probed; a folder or bucket probed
  with a file that is removed again; a server connected to and its privileges asked);
- ``models``: the SQL folder reads (sources, models, refs, no cycle);
- ``push``: the push settings and the push targets read.

With accounts configured (``api/accounts.py``), ``settings`` checks what concerns them
all (every key is a setting), then each account has its own ``settings``, ``api`` and
``history`` lines, named ``api [acme]``: its settings as resolved for it, one request
with its own key to its own server. The warehouse, models and push lines come once. A
failing account never stops the others from being checked.

Nothing is loaded, and nothing is left that was not there: dlt's working folder for a
server check is a temporary one. Exit 0 when every check passed, 1 when one failed, 2 when
the configuration itself is malformed (a setting missing or wrong).
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from feedback_sync.errors import ApiError, ConfigError, FeedbackError, NotFound, Unreachable
from feedback_sync.redaction import SCRUBBER
from feedback_sync.warehouse.target import Target

PROBE_PATH = "statuses"


@dataclass
class Outcome:
    name: str
    ok: bool
    detail: str
    bad_config: bool = False  # the configuration is malformed (exit 2), not just failing
    account: str | None = None  # the account checked, where the check is one account's

    @property
    def label(self) -> str:
        """The check as the text names it: ``api``, or ``api [acme]``."""
        return self.name if self.account is None else f"{self.name} [{self.account}]"


@dataclass
class CheckResult:
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0
    accounts: tuple[str, ...] = ()  # the accounts checked; () for a project of one

    def exit_code(self) -> int:
        if any(o.bad_config for o in self.outcomes):
            return 2
        return 0 if all(o.ok for o in self.outcomes) else 1

    def failed(self) -> list[str]:
        """The checks that failed, as the text names them."""
        return [o.label for o in self.outcomes if not o.ok]

    def report(self) -> str:
        width = max(len(o.label) for o in self.outcomes)
        lines = [
            f"check: {o.label:<{width}}  {'ok    ' if o.ok else 'FAILED'}  {o.detail}"
            for o in self.outcomes
        ]
        failed = self.failed()
        if failed:
            lines.append(
                f"{len(failed)} of {len(self.outcomes)} checks failed ({', '.join(failed)}) "
                f"in {self.seconds:.1f}s"
            )
        else:
            lines.append(f"all {len(self.outcomes)} checks passed in {self.seconds:.1f}s")
        return "\n".join(lines)


def run_check(
    target: Target, *, sql_folder: str | Path | None = None, accounts: tuple[str, ...] = ()
) -> CheckResult:
    """Runs every check (a failing one does not stop the others, except that the API is
    not asked without valid settings); with ``accounts``, the source's checks for each
    of them, into its own dataset of ``target``."""
    started = time.perf_counter()
    result = CheckResult(accounts=accounts)
    if accounts:
        _one(result, "settings", lambda: _shared_settings(accounts))
        for account in accounts:
            _source(result, target.for_account(account), account)
    else:
        _source(result, target, None)
    _one(result, "warehouse", lambda: _warehouse(target))
    if target.builds_models:
        _one(result, "models", lambda: _models(sql_folder))
        _one(result, "push", lambda: _push(sql_folder))
    result.seconds = time.perf_counter() - started
    return result


def _source(result: CheckResult, target: Target, account: str | None) -> None:
    """The settings, the API and the histories of one account (None: the project's one)."""
    settings = _one(result, "settings", lambda: _settings(account), account)
    if settings is not None:
        _one(result, "api", lambda: _api(settings, account), account)
        _one(result, "history", lambda: _history(settings, target), account)
    else:
        result.outcomes.append(
            Outcome("api", False, "not asked: the settings are not valid", account=account)
        )
        result.outcomes.append(
            Outcome("history", False, "not known: the settings are not valid", account=account)
        )


def _one(
    result: CheckResult,
    name: str,
    check: Callable[[], tuple[Any, str]],
    account: str | None = None,
) -> Any:
    try:
        value, detail = check()
    except ConfigError as exc:
        result.outcomes.append(Outcome(name, False, str(exc), bad_config=True, account=account))
        return None
    except FeedbackError as exc:
        result.outcomes.append(Outcome(name, False, str(exc), account=account))
        return None
    except Exception as exc:  # a driver's or dlt's own: the words failures.py knows
        from feedback_sync.app.failures import explain

        message, code = explain(exc)
        if message is None:
            message = SCRUBBER.scrub(f"{type(exc).__name__}: {_first_line(exc)}")
        result.outcomes.append(Outcome(name, False, message, bad_config=code == 2, account=account))
        return None
    result.outcomes.append(Outcome(name, True, detail, account=account))
    return value


def _settings(account: str | None) -> tuple[Any, str]:
    """The source's settings, every problem of them at once: for the project's one
    account, keys that are not settings (in any section feedback-sync owns), then each
    missing or malformed setting; for an account, its settings as resolved for it."""
    from feedback_sync.api.settings import FeedbackSettings

    if account is not None:
        from feedback_sync.api.accounts import account_problems, load_account_settings

        problems = account_problems(account)
        if problems:
            raise ConfigError(_listed(problems))
        settings = load_account_settings(account)
    else:
        from feedback_sync.api.settings import load_raw, settings_problems

        problems = _unknown_keys()
        raw = load_raw()
        problems += settings_problems(**raw)
        if problems:
            raise ConfigError(_listed(problems))
        settings = FeedbackSettings.validate(**raw)
    return settings, f"{settings.base_url} ({settings.auth_method} authentication)"


def _shared_settings(accounts: tuple[str, ...]) -> tuple[None, str]:
    """What concerns every account: each key of the settings files and variables is a
    setting."""
    problems = _unknown_keys()
    if problems:
        raise ConfigError(_listed(problems))
    return None, (
        f"every key is a setting; {len(accounts)} account{'s' if len(accounts) > 1 else ''} "
        f"checked, each on its own lines: {', '.join(accounts)}"
    )


def _unknown_keys() -> list[str]:
    import os

    from feedback_sync.app.setting_names import unknown_settings
    from feedback_sync.app.settings_files import settings_files

    return [u.message() for u in unknown_settings(settings_files(), os.environ)]


def _listed(problems: list[str]) -> str:
    if len(problems) == 1:
        return problems[0]
    return f"{len(problems)} problems:" + "".join(f"\n    - {p}" for p in problems)


def _history(settings: Any, target: Target) -> tuple[None, str]:
    """Which histories a sync here keeps; an ``on`` setting where none is kept is refused."""
    from feedback_sync.warehouse.history import ENTITIES, chosen

    kept = chosen(settings.history_choices(), target.history_sql is not None, target.describe())
    if not kept:
        where = (
            "set to false" if target.history_sql is not None else f"{target.describe()} keeps none"
        )
        return None, f"no history kept ({where})"
    return None, "kept for " + ", ".join(f"{n} ({ENTITIES[n].table})" for n in kept)


def _api(settings: Any, account: str | None) -> tuple[None, str]:
    from feedback_sync.api.client import FeedbackClient

    # the first contact's own bound applies: a wrong host or port fails within seconds
    probe = dataclasses.replace(settings, max_retries=min(settings.max_retries, 2))
    started = time.perf_counter()
    with FeedbackClient(probe) as client:
        try:
            client.get_json(PROBE_PATH, {"limit": 1}, resource="check")
        except Unreachable as exc:  # its words name the address and what to check
            raise _Failed(exc.detail) from None
        except NotFound:
            raise _Failed(
                f"{settings.base_url}/{PROBE_PATH} answered 404: the address is not the "
                f"API's (check {_where('base_url', account)}, which ends in /v1)"
            ) from None
        except ApiError as exc:
            if exc.status in (401, 403):
                raise _Failed(
                    f"the API refused the key (HTTP {exc.status}: {exc.detail}); check "
                    f"{_where('api_key', account, 'secrets.toml')}"
                ) from None
            raise _Failed(SCRUBBER.scrub(str(exc))) from None
    seconds = time.perf_counter() - started
    return None, f"GET /{PROBE_PATH} answered in {seconds:.2f}s with the key accepted"


def _where(name: str, account: str | None, file: str = "") -> str:
    """Where setting ``name`` of the project's one account, or of ``account``, is set."""
    if account is None:
        from feedback_sync.api.settings import env_name

        return f"{name} in .dlt/{file} or {env_name(name)}" if file else name
    from feedback_sync.api.accounts import section

    table = section(account)
    in_file = f" of .dlt/{file}" if file else ""
    return f"{name} in [{table.path}]{in_file} or {table.env(name)}"


def _warehouse(target: Target) -> tuple[None, str]:
    with tempfile.TemporaryDirectory(prefix="feedback-sync-check-") as scratch:
        # dlt's working folder, where a check needs one, is thrown away with the check
        probe = dataclasses.replace(target, pipelines_dir=Path(scratch))
        return None, probe.check_writable()


def _models(sql_folder: str | Path | None) -> tuple[None, str]:
    from feedback_sync.models.project import load_project, sql_dir

    root = sql_dir(sql_folder)
    project = load_project(root)
    from feedback_sync.models.project import GENERATED_VIEWS

    return None, (
        f"{root}: {len(project.models)} models read, in build order (a build adds the "
        f"{len(GENERATED_VIEWS)} generated views)"
    )


def _push(sql_folder: str | Path | None) -> tuple[None, str]:
    from feedback_sync.models.project import sql_dir
    from feedback_sync.push.settings import load_push_settings
    from feedback_sync.push.targets import load_targets

    settings = load_push_settings()
    targets = load_targets(sql_dir(sql_folder) / "push")
    return None, (
        f"{len(targets)} targets ({', '.join(targets)}); curated files in {settings.curated_dir}"
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "no detail"


class _Failed(FeedbackError):
    """A check that failed, with what to fix."""
