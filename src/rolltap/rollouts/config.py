"""The run configuration: everything ``rolltap eval`` needs, from TOML and/or flags.

```toml
tasks = "patterns.jsonl"            # relative to this file
harness = "chat"              # or "module:function"; or cmd = "python agent.py"
n = 8                         # first N tasks (default: all)
r = 1                         # rollouts per task
c = 16                        # rollouts at once
endpoint = "local"            # a name from [endpoints], a URL, or omitted: the local model;
                              # a list of URLs: replicas of one model (rollouts pinned)
rewards = ["prefix", "contains=0.5"]
store_unavailable_timeout_s = 300   # the database may be away this long; then the run stops
workers = 2                   # N worker processes; 0: this process; "auto" (omitted): worker
                              # processes when c >= 1024 and there are cores, else this one
ray = "auto"                  # or "local", or a cluster address: workers are Ray actors
                              # (workers_per_node = K instead of workers: K on every node;
                              # ray_working_dir = "." uploads a directory to every node)
max_staleness = 2             # a rollout begun 2+ policy versions ago gets no new calls
                              # (409 policy_stale): it ends stale (--max-staleness)
pause_max_s = 600             # while paused (POST /pause), a call waits this long at most,
                              # then gets 503 paused (--pause-max-s)
attempt_policy = "best"       # a retried run's summary counts, per (task, sample), its best
                              # attempt (or "last": its latest); --attempt-policy
retry_codes = ["upstream_timeout"]  # --retry-failed reruns only failures of these codes
                              # (omitted: every failed rollout); --retry-codes

[endpoints.local]
base_url = "http://127.0.0.1:8080/v1"   # or replicas = ["http://h1:8000/v1", "http://h2:8000/v1"]
model = "gemma"
api_key_env = "MY_KEY"

[endpoints.train]             # the token client (training): ids in, ids out
base_url = "http://127.0.0.1:8000/v1"
model = "Qwen/Qwen3-8B"
client = "tokens"
tokenizer = "/models/qwen3-8b"
tool_parser = "hermes"        # or qwen3_coder, llama3_json, mistral, deepseek_v3, openai
reasoning_parser = "think"    # or harmony (gpt-oss; implied by tool_parser "openai"), none

[endpoints.vllm]              # a chat relay that records the server's own token ids
base_url = "http://127.0.0.1:8000/v1"
model = "Qwen/Qwen3-8B"
capture_tokens = true         # vLLM's return_token_ids; the harness's answer stays as asked
capture_logprobs = true       # and logprobs (--capture-tokens / --capture-logprobs)
unsupported = "refuse"        # a translated call's inexpressible fields: a 400 (default
                              # "drop": left out, each recorded); --unsupported
forward_pause = "vllm"        # or "sglang": the gateway's pauses and resumes go to the
                              # engine too (vLLM /pause, /resume; SGLang's equivalents)

[limits]                      # per rollout; enforced by the gateway (and the runner: timeout)
max_turns = 10
max_tokens = 4096
timeout_s = 600

[sampling]                    # applied by the gateway to every request of a rollout
temperature = 0.0
max_tokens = 8
```

The agent harnesses (``claude-code``, ``codex``) take their flags from a ``[harness]``
table in place of ``harness = "…"`` (stored with the run as ``harness`` and
``harness_options``; a task's own ``harness`` object wins field by field):

```toml
[harness]
kind = "claude-code"          # or "codex"
model = "claude-sonnet-4-5"   # the name the agent sends (the gateway rewrites it)
max_turns = 8                 # claude-code: --max-turns
allowed_tools = ["Bash", "Edit", "Read", "Write"]    # claude-code: --allowedTools
permission_mode = "bypassPermissions"                # claude-code: --permission-mode
# sandbox = "workspace-write" # codex: read-only, workspace-write, danger-full-access
args = []                     # more CLI arguments, before the prompt
env = {}                      # more environment variables for the agent
```

``otel = true`` (and ``otel_content = true``) trace the run like ``--otel``; see docs/otel.md.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from rolltap.config import EndpointConfig, GatewaySettings
from rolltap.errors import ConfigError
from rolltap.results.attempts import AttemptPolicy, check_codes
from rolltap.rollouts.agent_options import AgentOptions
from rolltap.store import DEFAULT_LEASE_TTL_S

__all__ = [
    "RAY_NEEDS_ENDPOINT",
    "LimitsConfig",
    "RunConfig",
    "check_ray_fields",
    "describe_errors",
    "load_run_config",
    "read_toml",
]


class LimitsConfig(BaseModel):
    """Per-rollout limits; ``None`` means unlimited."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # bounded to 64 bits: what every store and wire format here can hold
    max_turns: int | None = Field(default=None, gt=0, le=2**63 - 1)
    max_tokens: int | None = Field(default=None, gt=0, le=2**63 - 1)
    timeout_s: float | None = Field(default=None, gt=0)

    def is_set(self) -> bool:
        return any(v is not None for v in (self.max_turns, self.max_tokens, self.timeout_s))


class RunConfig(BaseModel):
    """One evaluation run. Stored (as JSON) in the run row, so ``--resume`` can redo it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str | None = None
    tasks: str | None = None
    harness: str | None = None
    #: the agent harnesses' flags: the ``[harness]`` table's fields but ``kind``
    harness_options: AgentOptions = Field(default_factory=AgentOptions)
    cmd: str | None = None
    n: int | None = Field(default=None, gt=0)
    r: int = Field(default=1, gt=0)
    c: int = Field(default=16, gt=0)
    shuffle: bool = False
    seed: int = 0
    #: an [endpoints] name, a URL, or several URLs (the replicas of one model)
    endpoint: str | list[str] | None = None
    model: str | None = None
    api_key_env: str | None = None
    endpoints: dict[str, dict[str, Any]] = Field(default_factory=dict)
    max_inflight: int | None = Field(default=None, gt=0)
    #: how long a replica that refused connections gets no new rollouts (the endpoint's)
    replica_cooloff_s: float | None = Field(default=None, gt=0)
    #: the upstream's API, and the client kind (see EndpointConfig); None: the endpoint's
    dialect: Literal["chat", "messages", "responses"] | None = None
    client: Literal["relay", "tokens"] | None = None
    tokenizer: str | None = None
    completions_api: Literal["vllm", "llamacpp", "vllm-generate", "sglang"] | None = None
    #: the token client's parsers (see EndpointConfig); None: the endpoint's
    tool_parser: str | None = None
    reasoning_parser: str | None = None
    #: a chat relay's server-side token capture (see EndpointConfig); None: the endpoint's
    capture_tokens: bool | None = None
    capture_logprobs: bool | None = None
    #: a translated call's fields the upstream cannot express: drop or refuse (see
    #: EndpointConfig); None: the endpoint's
    unsupported: Literal["drop", "refuse"] | None = None
    rewards: list[str] = Field(default_factory=lambda: ["contains"])
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    sampling: dict[str, Any] = Field(default_factory=dict)
    store: str | None = None
    #: seconds the run's lease lasts unrenewed (it is renewed every 10 s): past it, a run
    #: whose process died reads ``interrupted``; longer than a store outage to survive
    lease_ttl_s: float = Field(default=DEFAULT_LEASE_TTL_S, gt=0)
    #: OpenTelemetry spans (the ``otel`` extra): True/False force them on/off; None: on
    #: when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set. ``otel_content`` adds prompts and
    #: completions to the spans.
    otel: bool | None = None
    otel_content: bool = False
    #: how long the database may stay unreachable before the run stops (store_unavailable)
    store_unavailable_timeout_s: float = Field(default=300.0, gt=0)
    #: where the rollouts run: ``"auto"`` (or None, not said): N worker processes when
    #: ``c`` is large enough to need them and the machine has the cores, else this
    #: process (:mod:`rolltap.rollouts.auto_workers`); 0: this process; N: N worker
    #: processes on this machine, ``c`` split evenly among them. ``ray``: Ray actors on a
    #: cluster (``local`` starts one for the run, ``auto`` joins the running one, or a
    #: cluster address): ``workers`` in all, or ``workers_per_node`` on every node
    workers: Annotated[int, Field(ge=0)] | Literal["auto"] | None = None
    ray: str | None = Field(default=None, min_length=1)
    workers_per_node: int | None = Field(default=None, gt=0)
    #: with ``ray``: a directory Ray uploads to every node as the workers' working
    #: directory, so ``module:function`` harnesses in it import on every node
    ray_working_dir: str | None = None
    #: how long a run's workers may take to start (and a Ray cluster to place them);
    #: also how long a run with work left waits for a lost worker to come back
    worker_start_timeout_s: float = Field(default=60.0, gt=0)
    #: the gateway's staleness bound (versions): a rollout whose first call was made this
    #: many policy versions before the current one ends ``stale``; None: the gateway's
    #: setting (``ROLLTAP_MAX_STALENESS``, else no bound)
    max_staleness: int | None = Field(default=None, gt=0)
    #: while an endpoint is paused, how long a call waits before ``503 paused``; None:
    #: the gateway's setting (``ROLLTAP_PAUSE_MAX_S``, else 600)
    pause_max_s: float | None = Field(default=None, gt=0)
    #: a retried run's summary: per (task, sample), its ``best`` attempt (highest reward,
    #: then done over failed, then the later) or its ``last``; stored, so later reads of
    #: the run use it (``rolltap eval --retry-failed``, docs/cli.md)
    attempt_policy: AttemptPolicy = "best"
    #: the error codes ``--retry-failed`` reruns (None, or ``["all"]``: every failed
    #: rollout); a retry pass stores the codes it ran with here
    retry_codes: list[str] | None = None
    #: the eval set this run is one of (``rolltap eval-set``: set there, not by a flag)
    #: and its place in the set's ``[[runs]]``; stored, so the set's resume finds it
    set_id: str | None = None
    set_index: int | None = Field(default=None, ge=0)

    @field_validator("retry_codes")
    @classmethod
    def _known_codes(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else check_codes(value)

    @model_validator(mode="before")
    @classmethod
    def _harness_table(cls, data: Any) -> Any:
        """``[harness]`` as a table: its ``kind`` is ``harness``, the rest its options."""
        if not isinstance(data, dict) or not isinstance(data.get("harness"), dict):
            return data
        if data.get("harness_options"):
            raise ValueError("give the agent's options in [harness] or harness_options, not both")
        table = dict(data["harness"])
        return {**data, "harness": table.pop("kind", None), "harness_options": table}

    @model_validator(mode="after")
    def _check_placement(self) -> RunConfig:
        check_ray_fields(self.ray, self.workers_per_node, self.ray_working_dir)
        if self.workers_per_node is not None and self.workers not in (None, "auto"):
            raise ValueError("give workers (in all) or workers_per_node, not both")
        if self.ray is not None and self.workers == 0:
            raise ValueError("workers = 0 runs in this process: not with ray")
        return self

    @property
    def distributed(self) -> bool:
        """Whether the rollouts run on worker processes or Ray actors (``auto`` is not
        decided yet: :func:`rolltap.evaluation.backend_for` decides it)."""
        return (isinstance(self.workers, int) and self.workers > 0) or self.ray is not None

    def placed(self, placement: dict[str, Any]) -> RunConfig:
        """A copy that runs where a backend says: ``workers``, ``ray``, ``workers_per_node``
        and ``ray_working_dir`` replaced by ``placement``'s (absent ones cleared). It is
        stored with the run, so a resume runs there too (:mod:`rolltap.rollouts.backend`)."""
        fields = ("workers", "ray", "workers_per_node", "ray_working_dir")
        return _validate({**self.model_dump(), **{k: placement.get(k) for k in fields}}, "backend")

    def merged(self, overrides: dict[str, Any]) -> RunConfig:
        """A copy with every non-``None`` override applied (flags over the file)."""
        data = self.model_dump()
        data.update({k: v for k, v in overrides.items() if v is not None})
        return _validate(data, "flags")

    def gateway_settings(self, base: GatewaySettings | None) -> GatewaySettings | None:
        """``base`` (None: the environment's) with the run's policy settings over it;
        ``base`` itself when the run sets none."""
        given = {name: getattr(self, name) for name in ("max_staleness", "pause_max_s")}
        given = {name: value for name, value in given.items() if value is not None}
        if not given:
            return base
        return (base or GatewaySettings.from_env()).model_copy(update=given)

    def endpoint_config(self) -> EndpointConfig | None:
        """The endpoint to use; ``None`` means: start the built-in local model."""
        if self.endpoint is None:
            return None
        fields: dict[str, Any]
        if isinstance(self.endpoint, list):
            fields = {**_replica_urls(self.endpoint), "model": self.model or "default"}
        elif self.endpoint in self.endpoints:
            fields = {"name": self.endpoint, **self.endpoints[self.endpoint]}
        elif self.endpoint.startswith(("http://", "https://")):
            fields = {"base_url": self.endpoint, "model": self.model or "default"}
        else:
            raise ConfigError(f"unknown endpoint {self.endpoint!r} (not in [endpoints])")
        if self.model is not None:
            fields["model"] = self.model
        if self.api_key_env is not None:
            fields["api_key_env"] = self.api_key_env
        overridden = ("max_inflight", "replica_cooloff_s", "dialect", "client", "tokenizer",
                      "completions_api", "tool_parser", "reasoning_parser",
                      "capture_tokens", "capture_logprobs", "unsupported")  # fmt: skip
        for name in overridden:
            if getattr(self, name) is not None:
                fields[name] = getattr(self, name)
        try:
            return EndpointConfig.model_validate(fields)
        except ValidationError as exc:
            raise ConfigError(f"endpoint {self.endpoint!r}: {describe_errors(exc)}") from exc


#: why ``ray`` needs an endpoint (said by ``rolltap eval`` and ``rolltap serve`` alike)
RAY_NEEDS_ENDPOINT = (
    "--ray needs --endpoint: the built-in local model listens on one machine's loopback, "
    "which workers on other nodes cannot reach"
)


def check_ray_fields(
    ray: str | None, workers_per_node: int | None, working_dir: str | None
) -> None:
    """The Ray-only fields need ``ray`` (a run config's and a serve config's alike)."""
    if ray is not None:
        return
    if working_dir is not None:
        raise ValueError("ray_working_dir is uploaded to Ray nodes: give ray too")
    if workers_per_node is not None:
        raise ValueError("workers_per_node places Ray actors: give ray too")


def _replica_urls(urls: list[str]) -> dict[str, Any]:
    """The address fields of an endpoint given as a list of URLs: one is ``base_url``."""
    if not urls:
        raise ConfigError("endpoint: an empty list names no URL")
    for url in urls:
        if not url.startswith(("http://", "https://")):
            raise ConfigError(
                f"endpoint: {url!r} is not a URL (several endpoints are the replicas of one,"
                " given by URL; name one [endpoints] table instead)"
            )
    return {"base_url": urls[0]} if len(urls) == 1 else {"replicas": list(urls)}


#: the ``rolltap eval`` flag of each field whose flag is not ``--field-name``
_FLAGS = {
    "n": "-n", "r": "-r", "c": "-c", "rewards": "--reward",
    "limits.timeout_s": "--timeout", "sampling.max_tokens": "--sample-max-tokens",
    "base_url": "--endpoint", "replicas": "--endpoint",
}  # fmt: skip


def describe_errors(exc: ValidationError, *, flags: bool = False) -> str:
    """A pydantic error on one line, each problem naming its field (its flag if ``flags``):
    ``-c: Input should be greater than 0 (got 0)``."""
    problems = []
    for error in exc.errors():
        field = ".".join(str(part) for part in error["loc"]) or "config"
        if flags:
            field = _FLAGS.get(field, "--" + field.rpartition(".")[2].replace("_", "-"))
        scalar = isinstance(error["input"], str | int | float) and error["type"] != "missing"
        got = f" (got {error['input']!r})" if error["loc"] and scalar else ""
        problems.append(f"{field}: {error['msg']}{got}")
    return "; ".join(problems)


def _validate(data: dict[str, Any], where: str) -> RunConfig:
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        problems = describe_errors(exc, flags=where == "flags")
        raise ConfigError(f"invalid run config ({where}): {problems}") from exc


def read_toml(file: Path, what: str) -> dict[str, Any]:
    """``file``'s TOML; a ConfigError naming ``what`` and the file when it cannot be read
    or parsed."""
    try:
        return tomllib.loads(file.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {file}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: invalid TOML: {exc}") from exc


def load_run_config(path: str | Path) -> RunConfig:
    """Read a TOML run config; raises ``ConfigError`` naming the file.

    A relative ``tasks`` path is relative to the config file's folder.
    """
    file = Path(path)
    data = read_toml(file, "run config")
    tasks = data.get("tasks")
    if isinstance(tasks, str) and not Path(tasks).is_absolute():
        data["tasks"] = str(file.parent / tasks)
    return _validate(data, str(file))
