"""Every problem with a set of variables, each as "$.json.path: message".

schema_errors() applies the complete schema (the chart's values.schema.json, written from
variables/schema.json by scripts/generate.py); semantic_errors() the rules a schema cannot say:
RULES (as data, generator/rules.py; the chart's templates/_rules.tpl is compiled from them), then the
rules the vocabulary cannot say (the chart's templates/_validate.tpl holds their twins), then the
rules of the target's engine (generator/engines/, errors(values)).
"""

from __future__ import annotations

import difflib
import json
import math
import re
import shlex
from functools import lru_cache

import jsonschema
import re2

from trainer import models  # the model registry's facts (no jax import)
from trainer.contract import IMAGE_DIRS, INTERNAL_ENV, MAX_GPUS_PER_HOST, OUTPUT_FLAGS, PROCESS_ENV, SYSTEM_DIRS

from . import engines, images, rules, set_values
from .errors import EXCERPT, excerpt
from .paths import SCHEMA_FILE, go_clean
from .program import OWN_PROGRAM_WARNING
from .rules import And, Clean, Contains, Eq, Fact, Gt, In, Int, LastPart, Lt, Matches, Mod, Mul, Ne, Not, Rule, Text
from .targets import target


@lru_cache(maxsize=1)
def schema() -> dict:
    return json.loads(SCHEMA_FILE.read_text())


@lru_cache(maxsize=None)
def _regex(pattern: str) -> "re2._Regexp":
    return re2.compile(pattern)


def _go_pattern(validator, pattern: str, instance, _schema):
    """`pattern` read as Helm and the API server read it, with Go's regexp (RE2): `$` is the end of the
    text (Python's `$` also matches before a trailing newline, so "name\n" would pass), and matching
    takes linear time whatever the input (a backtracking engine can be made to hang)."""
    if validator.is_type(instance, "string") and _regex(pattern).search(instance) is None:
        yield jsonschema.ValidationError(f"{_shown(instance)} does not match {json.dumps(pattern)}")


_Validator = jsonschema.validators.extend(jsonschema.Draft7Validator, {"pattern": _go_pattern})


@lru_cache(maxsize=1)
def _validator() -> jsonschema.Draft7Validator:
    return _Validator(schema())


def json_path(parts) -> str:
    path = "$"
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{excerpt(str(part))}"
    return path


def _shown(value) -> str:
    """The user's value as they wrote it (JSON, not Python's repr: true, null, "text"), cut short."""
    return excerpt(json.dumps(value, ensure_ascii=False))


_SIZE_RULES = {"maxLength": ("characters", "at most"), "minLength": ("characters", "at least"),
               "maxItems": ("items", "at most"), "minItems": ("items", "at least"),
               "maxProperties": ("keys", "at most"), "minProperties": ("keys", "at least")}


def _message(error) -> str:
    """jsonschema's message, with the user's value quoted as an excerpt (its messages start with the
    value's repr, which may be megabytes); size rules say the size and the limit instead."""
    if error.validator in _SIZE_RULES:
        unit, bound = _SIZE_RULES[error.validator]
        return f"{len(error.instance)} {unit}, {bound} {error.validator_value} allowed"
    value, shown = repr(error.instance), _shown(error.instance)
    if error.validator == "oneOf" and any("pattern" in branch for branch in error.validator_value):
        return f"{shown} is not a Kubernetes quantity (such as 500m, 1.5Gi or 2)"  # Quantity's branches
    if error.validator == "enum":
        return f"{shown} is not one of {', '.join(_shown(choice) for choice in error.validator_value)}"
    if error.validator == "type":
        types = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        return f"{shown} is not of type {' or '.join(types)}"
    if error.message.startswith(value):
        return shown + error.message[len(value):]
    return error.message if len(error.message) <= 4 * EXCERPT else excerpt(error.message)


def schema_errors(values: dict) -> list[str]:
    errors = []
    for error in sorted(_validator().iter_errors(values), key=lambda e: list(map(str, e.absolute_path))):
        path = list(error.absolute_path)
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            # Name each unknown key's own path, so a typo points at itself.
            allowed = set(error.schema.get("properties", {}))
            for key in sorted(set(error.instance) - allowed):
                errors.append(f"{json_path(path + [key])}: unknown key{_suggestion(path + [key], allowed)}")
            continue
        if error.validator == "propertyNames":
            errors.append(f"{json_path(path)}: invalid key: {_message(error)}")
            continue
        errors.append(f"{json_path(path)}: {_message(error)}{_number_hint(error)}")
    return errors


# Keys that were renamed: the old dotted key, and the key that replaced it.
RENAMED = {
    "training.hidden_sizes": "training.mlp.hidden_sizes",
}


def _dotted(parts) -> str:
    """A path as --set spells it: training.mlp.hidden_sizes, program.args[0]."""
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts).lstrip(".")


def _set_key(parts) -> str:
    """A path as a --set line takes it: a key's own . , = [ ] and backslash escaped with a backslash."""
    return "".join(f"[{p}]" if isinstance(p, int) else "." + re.sub(r"([.,=\[\]\\])", r"\\\1", str(p))
                   for p in parts).lstrip(".")


def _json_number(number: float) -> int | float:
    """A number as JSON writes it: an integral one without a fraction (010, 3.0 and 1e3 are 10, 3, 1000)."""
    return int(number) if number.is_integer() and abs(number) < 2 ** 53 else number


def _number_hint(error) -> str:
    """A number written where --set keeps it a string (Helm's --set types only integers: 0.05, 1e3
    and 010 stay strings): say how to give it as a number."""
    wanted = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
    if error.validator != "type" or not isinstance(error.instance, str) or not {"number", "integer"} & set(wanted):
        return ""
    try:
        number = float(error.instance)
    except ValueError:
        return ""
    if not math.isfinite(number):
        return ""  # out of range however it is written (thousands of digits): no number to ask for
    if not isinstance(set_values.typed(error.instance), str):
        return ""  # --set would have typed it: it came quoted from a file or --set-string
    value = _json_number(number)
    refused = next(_validator().evolve(schema=error.schema).iter_errors(value), None)
    if refused is not None:  # the number itself is refused here too: a --set-json of it would fail
        return f"; --set keeps {excerpt(error.instance)} a string, as Helm does, and as a number {_message(refused)}"
    line = shlex.quote(f"{_set_key(error.absolute_path)}={json.dumps(value)}")
    return (f"; --set keeps {excerpt(error.instance)} a string, as Helm does: use "
            f"--set-json {line}, or write it unquoted in a variables file")


def _suggestion(parts: list, allowed: set[str]) -> str:
    renamed = RENAMED.get(_dotted(parts))
    if renamed:
        return f"; it was renamed: use {renamed}"
    key = parts[-1]
    close = difflib.get_close_matches(str(key), sorted(allowed), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else f" (allowed: {', '.join(sorted(allowed))})"


_HOSTS, _LOCAL, _BATCH = Int("hosts_count"), Int("local_device_count"), Int("training.batch_size")
_DEVICES, _EXAMPLES = Mul(_HOSTS, _LOCAL), Int("training.train_examples")
_MODEL_AXIS, _STRATEGY = Int("training.model_parallelism"), Text("training.strategy")
_DTYPE, _PORT = Text("training.allreduce_dtype"), Int("metrics.port")
# A tag or a digest written into image.repository (a registry's port is part of the repository), or a
# repository no runtime can pull (the pods would wait in InvalidImageName).
_REPOSITORY = Text("image.repository")
_DIGEST, _TAG = Contains(_REPOSITORY, "@"), Contains(LastPart(_REPOSITORY, "/"), ":")
_PULLABLE = Matches(_REPOSITORY, Fact("imageRepositoryPattern", images.REPOSITORY_PATTERN))


def _system_dir(field: str) -> Rule:
    return Rule(f"$.{field}.dir", In(Clean(Text(f"{field}.dir")), Fact("systemDirs", list(SYSTEM_DIRS))),
                "'%s' is a system directory; choose a directory of its own", (Text(f"{field}.dir"),),
                example={field: {"dir": "/tmp/"}})


# The rules of every target that the rule vocabulary can say (generator/rules.py); the chart runs the
# same, compiled into its templates/_rules.tpl.
RULES = (
    Rule("$.training.batch_size", Mod(_BATCH, _DEVICES),
         "%d is not divisible by the global device count %d (hosts_count %d x local_device_count %d)",
         (_BATCH, _DEVICES, _HOSTS, _LOCAL), example={"hosts_count": 3}),
    Rule("$.training.train_examples", And(Gt(_EXAMPLES, 0), Lt(_EXAMPLES, _BATCH)),
         "%d is less than one batch (training.batch_size %d)", (_EXAMPLES, _BATCH),
         example={"training": {"train_examples": 2}}),
    Rule("$.training.allreduce_dtype", And(Ne(_DTYPE, "float32"), Ne(_STRATEGY, "pmap")),
         "%s needs training.strategy 'pmap'", (_DTYPE,),
         example={"training": {"allreduce_dtype": "bfloat16", "strategy": "sharded"}}),
    Rule("$.training.model_parallelism", And(Gt(_MODEL_AXIS, 1), Ne(_STRATEGY, "sharded")),
         "a model axis needs training.strategy 'sharded'", example={"training": {"model_parallelism": 2}}),
    Rule("$.local_device_count", And(Eq(Text("accelerator"), "gpu"),
                                     Gt(_LOCAL, Fact("maxGpusPerHost", MAX_GPUS_PER_HOST))),
         "%d GPUs per host exceeds %d", (_LOCAL, Fact("maxGpusPerHost", MAX_GPUS_PER_HOST)),
         example={"accelerator": "gpu", "local_device_count": MAX_GPUS_PER_HOST + 1}),
    Rule("$.checkpoint.dir", Eq(Clean(Text("data.dir")), Clean(Text("checkpoint.dir"))), "must differ from data.dir",
         example={"data": {"dir": "/x/"}, "checkpoint": {"dir": "/x//"}}),
    _system_dir("data"),
    _system_dir("checkpoint"),
    Rule("$.image.repository", _DIGEST, "'%s' holds a digest; give it as image.digest", (_REPOSITORY,),
         example={"image": {"repository": "trainer@sha256:" + "a" * 64}}),
    Rule("$.image.repository", And(Not(_DIGEST), _TAG), "'%s' holds a tag; give it as image.tag (a registry's port, "
         "as in localhost:5000/trainer, is part of the repository)", (_REPOSITORY,),
         example={"image": {"repository": "localhost:5000/trainer:v2"}}),
    Rule("$.image.repository",
         And(Not(_DIGEST), Not(_TAG), Not(_PULLABLE)),
         "'%s' is not an image repository: [registry[:port]/]path, path components of letters and digits joined by "
         "one '.', one or two '_' or dashes, separated by one '/'", (_REPOSITORY,),
         example={"image": {"repository": "team..ml/trainer"}}),
    Rule("$.metrics.port", And(Gt(_PORT, 0), Lt(_PORT, 1024)),
         "%d is a privileged port; use 1024-65535 (the pods run as non-root), or 0 for no endpoint", (_PORT,),
         example={"metrics": {"port": 80}}),
)


def semantic_errors(values: dict) -> list[str]:
    """Rules across fields: RULES, the layout and contract rules the vocabulary cannot say, then the
    rules of the target's engine. Assumes the values passed the schema."""
    errors = rules.errors(RULES, values)
    training, local = values["training"], values["local_device_count"]
    devices = values["hosts_count"] * local
    model = training["model_parallelism"]
    if model > 1:
        # the sizes the model's sharding rules split (trainer/models; the chart reads files/models.json)
        axis_setting = models.get(training["model"]).model_axis
        split_key, split = f"{training['model']}.{axis_setting}", training[training["model"]][axis_setting]
        if local % model or any(size % model for size in split):
            errors.append(f"$.training.model_parallelism: {model} must divide the local device count {local} "
                          f"(a model axis stays within one host) and each of training.{split_key} "
                          f"({','.join(str(size) for size in split)})")
        elif training["batch_size"] % (devices // model):
            errors.append(f"$.training.batch_size: {training['batch_size']} is not divisible by the data-parallel "
                          f"size {devices // model}")
    data, checkpoint = values["data"], values["checkpoint"]
    for field, path in (("data.dir", data["dir"]), ("checkpoint.dir", checkpoint["dir"])):
        clean = go_clean(path)
        overlapped = [d for d in IMAGE_DIRS if clean == d or clean.startswith(d + "/") or d.startswith(clean + "/")]
        if overlapped and clean not in SYSTEM_DIRS:  # a system directory is RULES
            errors.append(f"$.{field}: '{path}' overlaps {overlapped[0]}, which the image or the kernel provides; "
                          "choose a directory of its own")
    first: dict[str, int] = {}
    for i, entry in enumerate(values.get("env") or []):  # every target: the trainer's own contract
        name = entry.get("name")
        if name in PROCESS_ENV:
            errors.append(f"$.env[{i}].name: {name} is set for each process by the job; "
                          "one value for every process would break the ranks")
        elif name in INTERNAL_ENV:
            errors.append(f"$.env[{i}].name: {name} is one of the trainer's internal variables, set by the job "
                          "or the trainer itself; choose another name")
        elif name in first:
            errors.append(f"$.env[{i}].name: {name} is already set by $.env[{first[name]}]; "
                          "a container takes each name once")
        first.setdefault(name, i)
    if not values["program"]["command"]:  # the built-in trainer: its outputs go where the variables say
        for i, arg in enumerate(values["program"]["args"]):
            for option, variable in sorted(OUTPUT_FLAGS.items()):
                if arg == option or arg.startswith(option + "="):
                    errors.append(f"$.program.args[{i}]: {option} is set from {variable} (where jaxgen run and "
                                  f"run.sh find the results); set {variable} instead")
    errors += engines.errors(values)  # the rules of the target's engine
    return errors


def warnings(values: dict) -> list[str]:
    """What valid values still lose or will not do: what the target's engine says (outputs on a volume
    that dies with its pod, a queue that is ignored), and a program of the user's own that cannot bring
    up distributed JAX by itself on this engine (a program folder's shipped sitecustomize lets it)."""
    found = engines.warnings(values)
    if values["program"]["command"] and not values["program"]["dir"] and target(values).own_program_init:
        found.append(OWN_PROGRAM_WARNING % target(values).own_program_init)
    return found


def validation_errors(values: dict) -> list[str]:
    errors = schema_errors(values)
    return errors if errors else semantic_errors(values)
