"""Config keys and values checked before any work: one sentence naming the key and what it may be (exit 2).

Keys: every config node that code reads is a constructor's arguments (its ``_target_``; ``building.build``
refuses a key the target has no parameter for, and ``check_config_keys`` says so before any work), or,
for the few nodes no constructor receives (the top level, ``paths``, ``bias_eval``), the fields of a
schema dataclass the task layer names. Keys appended on the command line (``+trainer.max_epoch=3``) must
be keys some config of that group defines.

Values: each rule lives in one place. A class that receives a config node states what its values may
be (rules, ``Rule``, checked by its ``check_values`` classmethod, which its constructor calls too), and
``validate`` calls it on the composed config for the class each node's ``_target_`` builds. ``RULES``
holds only the keys no class receives whole (the seed, device strings, the logger's kind). Keys a config
does not have are skipped, so one ``validate`` serves train.py, evaluate.py and pretrain_lm.py.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import math
import re
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from omegaconf import DictConfig, ListConfig, OmegaConf

from nerbias.errors import NerbiasError

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
_DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?|mps")


class ConfigError(NerbiasError):
    """A config value outside what its key allows."""


# The keys of a config node that are the config system's, not its target's (``building.build``).
PARTIAL = "_partial_"


class BuildError(ConfigError):
    """A config node its ``_target_`` cannot take (a key it has no parameter for, a target that is not there)."""


def target_of(target: Any) -> Any:
    """The class or function a ``_target_`` names (BuildError when it cannot be imported)."""
    from hydra.utils import get_object

    try:
        return get_object(target)
    except Exception as error:  # hydra raises ImportError or a wrapped error for a bad path
        raise BuildError(f"_target_ {target!r} cannot be imported ({error})") from None


def parameters_of(factory: Any) -> set[str] | None:
    """The names ``factory`` takes by keyword; None when it takes ``**kwargs`` (anything goes) or has no
    signature Python can read (a builtin)."""
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return None
    return {name for name, p in parameters.items()
            if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)}


def unexpected_keys(node: Mapping[str, Any], where: str = "") -> str | None:
    """Why ``node`` (plain data) cannot be built: its first key, here or in a nested node with a ``_target_``,
    that its target takes no parameter for, as one sentence naming the dotted key and what the target
    takes; None when every key fits. Targets that cannot be imported are left to ``build`` to report."""
    target = node.get("_target_")
    if target is not None:
        try:
            parameters = parameters_of(target_of(target))
        except BuildError:
            parameters = None
        if parameters is not None:
            unknown = sorted(key for key in node if key not in parameters | {"_target_", PARTIAL})
            if unknown:
                return (f"{where}{unknown[0]}: {target} takes no such argument (it takes: "
                        f"{', '.join(sorted(parameters)) or 'nothing'}); a typo, or a setting of another node?")
    for key, value in node.items():
        if isinstance(value, Mapping):
            problem = unexpected_keys(value, f"{where}{key}.")
            if problem:
                return problem
    return None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Rule:
    """What one key may be: a predicate and the words that say it ("an integer >= 1")."""

    allowed: Callable[[Any], bool]
    description: str

    def check(self, key: str, value: Any) -> None:
        if not self.allowed(value):
            raise ConfigError(f"{key}={value!r}: must be {self.description}")


def optional(rule: Rule, null_means: str = "") -> Rule:
    """``rule``, or null (``null_means`` says what null does, e.g. "no clipping")."""
    return Rule(lambda v: v is None or rule.allowed(v), f"{rule.description}, or null" +
                (f" ({null_means})" if null_means else ""))


def one_of(*choices: Any, description: str | None = None) -> Rule:
    return Rule(lambda v: v in choices, description or " or ".join(str(c) for c in choices))


def at_least(low: int) -> Rule:
    return Rule(lambda v: _integer(v) and v >= low, f"an integer >= {low}")


def existing_file(null_means: str | None = None) -> Rule:
    """A path to a file that is there (or, with ``null_means``, null: what null does)."""
    rule = Rule(lambda v: isinstance(v, (str, Path)) and Path(v).is_file(), "an existing file")
    return optional(rule, null_means) if null_means else rule


POSITIVE_INTEGER = at_least(1)
POSITIVE_NUMBER = Rule(lambda v: _number(v) and v > 0, "a number > 0")
NON_NEGATIVE_NUMBER = Rule(lambda v: _number(v) and v >= 0, "a number >= 0")
PROBABILITY = Rule(lambda v: _number(v) and 0 <= v <= 1, "a probability in [0, 1]")
LEVEL = Rule(lambda v: _number(v) and 0 < v < 1, "a level between 0 and 1, e.g. 0.95")
FRACTION_BELOW_ONE = Rule(lambda v: _number(v) and 0 <= v < 1, "a number in [0, 1)")
BOOLEAN = Rule(lambda v: isinstance(v, bool), "true or false")
DEVICE = Rule(lambda v: isinstance(v, str) and bool(_DEVICE.fullmatch(v)), "auto, cpu, cuda or cuda:N")


def check_values(values: Mapping[str, Any], rules: Mapping[str, Rule], prefix: str) -> None:
    """Each key of ``rules`` that ``values`` has, checked; the message names ``prefix + key``. The
    class that receives a config node states its rules once and calls this from its constructor and
    from its ``check_values`` classmethod (what ``validate`` calls before any work)."""
    for key, rule in rules.items():
        if key in values:
            rule.check(f"{prefix}{key}", values[key])


# The keys no class receives whole (the seed, device strings, data limits, the evaluation loop's settings,
# labels); the rules of the keys a class receives are that class's.
RULES: dict[str, Rule] = {
    "seed": at_least(0),
    "trainer.optimizer.lr": POSITIVE_NUMBER,  # a torch optimizer's: torch checks it only when it is built
    "trainer.device": DEVICE,
    "tagger.device": DEVICE,
    "tagger.batch_size": POSITIVE_INTEGER,
    "logger.kind": one_of("wandb", "none", description="wandb or none (logger=wandb|none)"),
}


def check_key(key: str, value: Any) -> None:
    """``value`` checked by the rule of ``key`` in RULES (for a class that receives one such key, e.g. every
    tagger's ``batch_size``: the rule is stated here once, for all of them)."""
    RULES[key].check(key, value)


def _select(cfg: DictConfig, key: str) -> tuple[bool, Any]:
    """(present, value): a missing key or one whose interpolation fails counts as absent here."""
    missing = object()
    value = OmegaConf.select(cfg, key, default=missing, throw_on_missing=False, throw_on_resolution_failure=False)
    return value is not missing, value


def known_group_keys(group: str) -> set[str]:
    """Every dotted key any config file of ``configs/<group>/`` defines (for appended-key checks); a file of a
    nested group (``configs/augment/name_pool/ambiguous.yaml``) defines its keys under that group's name."""
    keys: set[str] = set()
    for path in (CONFIGS / group).rglob("*.yaml"):
        package = ".".join(path.relative_to(CONFIGS / group).parent.parts)

        def walk(node: Any, prefix: str) -> None:
            if isinstance(node, dict):
                for key, value in node.items():
                    keys.add(f"{prefix}{key}")
                    walk(value, f"{prefix}{key}.")
        walk(OmegaConf.to_container(OmegaConf.load(path), resolve=False), f"{package}." if package else "")
    return keys


def check_appended_keys(overrides: Iterable[str]) -> None:
    """``+group.key=value`` overrides: the key must exist in some config of that group."""
    for override in overrides:
        if not override.startswith("+") or override.startswith("++") or "=" not in override:
            continue
        key = override[1:].split("=", 1)[0]
        group, _, rest = key.partition(".")
        if not rest or group in ("hydra",) or not (CONFIGS / group).is_dir():
            continue
        if rest not in known_group_keys(group):
            raise ConfigError(f"{key}: no {group} config has the key {rest!r}, so nothing would read it "
                              f"(a typo? without '+', Hydra checks the key exists)")


def _target_problem(target: Any) -> str | None:
    """Why a ``_target_`` cannot be found (a typo: no such module or attribute), or None. A module
    that exists but fails to import for another reason is left for the build to report."""
    if not isinstance(target, str) or not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", target):
        return "must be a dotted path to a class or function"
    parts = target.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            found = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name and (module_name == error.name or module_name.startswith(error.name + ".")):
                continue  # this prefix is not a module: try a shorter one
            return None  # the module exists but lacks a dependency of its own
        except Exception:  # noqa: BLE001 - any other import failure is the build's to report
            return None
        for depth, attribute in enumerate(parts[cut:], start=cut):
            if not hasattr(found, attribute):
                return f"{'.'.join(parts[:depth])} has no {attribute!r} (a typo?)"
            found = getattr(found, attribute)
        return None
    return f"no module named {parts[0]!r} (a typo?)"


def check_targets(cfg: DictConfig) -> None:
    """Every ``_target_`` of the config names something importable, before any data is read
    (Hydra would find a misspelt optimizer only when it builds it, after data and embeddings)."""
    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "_target_":
                    problem = _target_problem(value)
                    if problem:
                        raise ConfigError(f"{prefix}_target_={value!r}: {problem}")
                elif key != "hydra":
                    walk(value, f"{prefix}{key}.")

    walk(OmegaConf.to_container(cfg, resolve=False), "")


def check_config_keys(cfg: DictConfig, schemas: Mapping[str, type]) -> None:
    """Stop at a key nothing reads (a misspelt ``model.hiden_size`` in a YAML file would otherwise leave the
    default in force and say nothing), before any work.

    A node with a ``_target_`` takes its target's parameters (``unexpected_keys``, as ``building.build``
    will); a node without one that code reads whole takes the fields of its schema (``schemas``: dotted
    path, "" for the top level -> a dataclass). Other nodes (free-form values such as the ELMo ``lstm``
    options, the labels of ``bias_eval.corpora``) are walked through for targets.
    """
    def walk(node: Any, path: str) -> None:
        if not isinstance(node, Mapping):
            return
        where = f"{path}." if path else ""
        if "_target_" in node:
            problem = unexpected_keys(node, where)
            if problem:
                raise ConfigError(problem)
            return
        if path in schemas:
            accepted = {f.name for f in dataclasses.fields(schemas[path])}
            unknown = sorted(key for key in node if key not in accepted)
            if unknown:
                group = f"the {path} group" if path else "the top level"
                raise ConfigError(f"{where}{unknown[0]}: no code reads this key ({group} takes: "
                                  f"{', '.join(sorted(accepted))}); a typo, or a setting of another group?")
        for key, value in node.items():
            if key != "hydra":
                walk(value, f"{where}{key}")

    walk(OmegaConf.to_container(cfg, resolve=False), "")


def _node_values(cfg: DictConfig, path: str) -> dict[str, Any] | None:
    """The keys of the node at ``path`` that resolve, as plain values (lists as lists); None when the
    config has no such node."""
    node = OmegaConf.select(cfg, path, default=None, throw_on_missing=False, throw_on_resolution_failure=False)
    if not isinstance(node, DictConfig):
        return None
    values = {}
    for key in node.keys():
        present, value = _select(cfg, f"{path}.{key}")
        if present:
            values[str(key)] = OmegaConf.to_container(value, resolve=True) \
                if isinstance(value, (DictConfig, ListConfig)) else value
    return values


def _target_owner(target: Any, with_rules: bool = True) -> Any:
    """The class a ``_target_`` builds (a class, or the class of a classmethod constructor such as
    ``WinogenderCorpus.from_file``) when it states its values' rules (``check_values``; any class when not
    ``with_rules``), else None."""
    try:
        found = target_of(target)
    except BuildError:  # check_targets names a misspelt target; the build reports the rest
        return None
    owner = found.__self__ if inspect.ismethod(found) and isinstance(found.__self__, type) else found
    return owner if isinstance(owner, type) and (hasattr(owner, "check_values") or not with_rules) else None


def _target_owned_nodes(cfg: DictConfig) -> list[tuple[str, Any]]:
    """(path, owner) of every config node whose ``_target_`` builds a class that states its rules."""
    found = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, Mapping):
            owner = _target_owner(node["_target_"]) if "_target_" in node else None
            if owner is not None:
                found.append((path, owner))
            for key, value in node.items():
                if key != "hydra":
                    walk(value, f"{path}.{key}" if path else str(key))

    walk(OmegaConf.to_container(cfg, resolve=False), "")
    return found


def check_missing_values(cfg: DictConfig) -> None:
    """A ``???`` left in a node with a ``_target_`` (a value the user must give): one line naming the key,
    with the example its class gives (``EXAMPLES``: key -> what to give)."""
    def walk(node: Any, path: str) -> None:
        if not isinstance(node, DictConfig):
            return
        for key in node.keys():
            where = f"{path}.{key}" if path else str(key)
            if key != "hydra" and OmegaConf.is_missing(node, key):
                if "_target_" in node:
                    owner = _target_owner(node["_target_"], with_rules=False)
                    example = getattr(owner, "EXAMPLES", {}).get(str(key)) if owner is not None else None
                    raise ConfigError(f"{where}: missing; give " + (example or f"a value ({where}=...)"))
            elif key != "hydra":
                walk(node._get_node(key), where)

    walk(cfg, "")


def check_config_values(cfg: DictConfig) -> None:
    """Every value by its rule: those of RULES, then each node's by the class its ``_target_`` builds."""
    for key, rule in RULES.items():
        present, value = _select(cfg, key)
        if present:
            rule.check(key, value)
    for path, owner in _target_owned_nodes(cfg):
        values = _node_values(cfg, path)
        if values is not None:
            owner.check_values(values, f"{path}.")


def validate(cfg: DictConfig, overrides: Iterable[str] = (), schemas: Mapping[str, type] | None = None) -> None:
    """Raise ConfigError for the first key nothing reads (``schemas``: see ``check_config_keys``; None: keys
    are not checked) or value outside what its key allows: a node with a ``_target_`` is checked by the
    class its target builds (``check_values``), the keys no class receives by RULES."""
    check_targets(cfg)
    if schemas is not None:
        check_config_keys(cfg, schemas)
    check_appended_keys(overrides)
    check_config_values(cfg)
    check_missing_values(cfg)
    for key in ("trainer.device", "tagger.device"):
        present, device = _select(cfg, key)
        if present and isinstance(device, str) and device.startswith("cuda"):
            import torch

            if not torch.cuda.is_available():
                raise ConfigError(f"{key}={device}: this machine has no CUDA device (use auto or cpu)")
