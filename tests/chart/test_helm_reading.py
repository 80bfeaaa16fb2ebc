"""jaxgen reads a values file as Helm does. A probe chart that prints `.Values` as JSON is the
oracle: every scalar of a generated corpus (YAML 1.1 look-alikes, timestamps, base-60 numbers, Go's
integer syntax, floats) is written plain, as a value and as a key, and both readers must agree.
A document that its aliases would blow up is refused by both, quickly and in bounded memory."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys

import pytest

from generator import yaml_text
from generator.errors import UserError
from generator.values import _key_text, as_values
from tests.support.strategies import YAML_LOOKALIKES

from .helm import helm

# Plain scalars whose meaning differs between YAML 1.1, YAML 1.2, PyYAML and go-yaml.
EDGE = ["2024-01-01", "2001-12-14t21:59:43.10-05:00", "2024-01-01 10:00:00", "1:30:00", "190:20:30", "12:30",
        "-1:30", "010", "0777", "08", "09.5", "0o17", "0O17", "0x1F", "0X1f", "0b101", "-0b101", "+0x10",
        "1_000", "1__0", "_1", "1_", "0_7", "0x_1F", "1e3", "1E3", "1.0e+3", "-1.5e-3", "3.", "0.", ".5", "-.5",
        "+12", "-0", "+0", "00", "1.10", "1.2.3", "9223372036854775807", "9223372036854775808",
        "18446744073709551615", "18446744073709551616", "-9223372036854775809", "y", "Y", "n", "N", "yes",
        "Yes", "YES", "yEs", "no", "NO", "on", "On", "ON", "oN", "off", "OFF", "true", "TRUE", "tRUE",
        "false", "null", "Null", "NULL", "nULL", "~", "0.1.0", "v1", "1e", "e3", "0x", "0b", "0o", "0xG",
        "0b2", "0o8", "1-2", "1+2", "+", "-1-", "1.e5", ".e5", "1e+", "+.5", "0e0"]
NOT_JSON = {".inf", "-.inf", ".nan"}  # Helm cannot turn these into JSON; jaxgen refuses them too


def corpus(count: int = 300, seed: int = 7) -> list[str]:
    """EDGE, the plain-able look-alikes, and number-like strings drawn from Go's literal alphabet."""
    rng = random.Random(seed)
    alphabet = "0123456789_.eE+-xXoObBaAfF"
    drawn = {rng.choice("+-0123456789.") + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
             for _ in range(count)}
    lookalikes = [s for s in YAML_LOOKALIKES if PLAIN.fullmatch(s)]
    scalars = dict.fromkeys(EDGE + lookalikes + sorted(drawn))
    return [s for s in scalars if s not in NOT_JSON and PLAIN.fullmatch(s)]


# Scalars that are one plain scalar as a value and as a key (no indicator, no document marker).
PLAIN = re.compile(r"(?!---$|\.\.\.$|-$)[A-Za-z0-9_.+~-][A-Za-z0-9_.+~:-]*(?<!:)")


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    chart = tmp_path_factory.mktemp("probe")
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: probe\nversion: 0.1.0\n")
    (chart / "templates").mkdir()
    (chart / "templates" / "values.json").write_text("{{ toJson .Values }}\n")
    return chart


def helm_reads(probe, text: str, tmp_path) -> dict | str:
    path = tmp_path / "values.yaml"
    path.write_text(text)
    result = helm("template", "p", str(probe), "-f", str(path))
    if result.returncode:
        return result.stderr.strip().splitlines()[-1]
    return json.loads(result.stdout.split("\n", 2)[2])  # after "---" and the "# Source:" line


def same(a, b) -> bool:
    """Equal as JSON data, numbers compared as float64 (Helm holds every number as one)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def test_scalars_read_as_helm_reads_them(probe, tmp_path):
    scalars = corpus()
    assert len(scalars) > 250
    values = "".join(f"v{i}: {s}\n" for i, s in enumerate(scalars))
    theirs = helm_reads(probe, values, tmp_path)
    assert isinstance(theirs, dict), theirs
    ours = as_values(yaml_text.load(values), "probe")
    wrong = {scalars[int(k[1:])]: (ours[k], theirs[k]) for k in theirs if not same(ours[k], theirs[k])}
    assert not wrong, f"scalar: (jaxgen, helm) {wrong}"


def test_keys_read_as_helm_reads_them(probe, tmp_path):
    """As keys: one scalar per key jaxgen reads (it refuses a key given twice, where Helm keeps the
    last); a null key or an unsigned 64-bit number is refused by both."""
    unique, refused = {}, []
    for s in corpus():
        [key] = yaml_text.load(f"{s}: x\n")
        if _key_text(key) is None:
            refused.append(s)
        else:
            unique.setdefault(_key_text(key), []).append(s)
    text = "keys:\n" + "".join(f"  {group[0]}: {group[0]!r}\n" for group in unique.values())
    theirs = helm_reads(probe, text, tmp_path)
    assert isinstance(theirs, dict), theirs
    assert as_values(yaml_text.load(text), "probe") == theirs
    assert refused
    for s in refused:
        assert "unsupported map key" in helm_reads(probe, f"{s}: x\n", tmp_path)
        with pytest.raises(UserError, match="is not a string"):
            as_values(yaml_text.load(f"{s}: x\n"), "probe")


def bomb(levels: int, width: int = 10) -> str:
    lines = [f"l0: &l0 [{', '.join(['x'] * width)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("levels", [3, 4, 9])
def test_aliases_are_bounded_as_helm_bounds_them(probe, tmp_path, levels):
    """3 levels (1,110 nodes) is fine for both; 4 and 9 (10^4 and 10^9 nodes) are excessive for both."""
    text = bomb(levels)
    theirs = helm_reads(probe, text, tmp_path)
    path = tmp_path / "bomb.yaml"
    path.write_text(text)
    code = ("import resource, sys, time\n"
            "from generator.values import read_document\n"
            "rss, start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, time.process_time()\n"
            "try:\n    read_document(sys.argv[1]); print('read')\n"
            "except Exception as e:\n    print(e)\n"
            "print(time.process_time() - start, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss)\n")
    proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60)
    message, measures = proc.stdout.strip().splitlines()
    # CPU seconds (a loaded machine stretches the wall clock, not the work) and the peak's growth while reading
    seconds, grown_kib = float(measures.split()[0]), int(measures.split()[1])
    if levels == 3:
        assert isinstance(theirs, dict) and message == "read", (theirs, message)
    else:
        assert "excessive aliasing" in theirs and "excessive aliasing" in message, (theirs, message)
        assert seconds < 1.0 and grown_kib < 50 * 1024, (seconds, grown_kib)


# --set lines: Helm's own syntax, look-alikes of other syntaxes, and random strings of its grammar.
SET_LINES = ["a=1,b=2", "a.b=x,a.c=y", "l={x,y}", "l={}", "l={a,{b}", "l[0]=x", "l[1]=x", "l[0][1]=x", "l[0].k=v",
             "l[-1]=x", "l[65537]=x", "l[x]=1", "l[1]x=1", "a\\.b=1", "a=x\\,y", "a=x\\", "a==b", "a=b=c", "a",
             "a,", "a=", "=x", ".a=1", "a.=1", "a..b=1", "a=010", "a=1_0", "a=1.10", "a=1e3", "a=+3", "a=-0",
             "a=0", "a=00", "a=TRUE", "a=Null", "a=9223372036854775807", "a=9223372036854775808", "a= 1", "a=1 ",
             "a={x,y},b=1", "a={x,y}b=1", "a[0]=1,a[2]=3", "a=1,a.b=2", "a.b=1,a=2", "a.b=1,a[0]=2", "a[0]=1,a.b=2",
             "a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z.aa.bb.cc.dd.ee=1",
             "a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z.aa.bb.cc.dd=1", "a={x\\,y,z}", "a={x,y\\}",
             "a\\=b=1", "a[0]=x,a[0].b=1", "a[0][0]=1,a[0][1]=2", "a=#x", "a=x #y",
             # strings.EqualFold: ſ folds to s (K, the Kelvin sign, to k); other letters do not fold to ASCII
             "a=fal\u017fe", "a=FAL\u017fE", "a=nu\u017f\u017f", "a=\u017f", "a=truE", "a=nuLL", "a=true\u212a",
             "a=\u0130", "a=" + "7" * 5000, "a=-" + "9" * 25]
JSON_LINES = ['a={"b": [1, 2.5]}', "a=", "a= ,b=1", 'a="s"', "a=1.5e3", "a=NaN", "a=[1,", 'a=1 b=2', "a=1,b=2",
              'a={"x": 1}x=1', "a=null", "a=true", "a=-0", "a=1e999", 'a="\\u00e9"', "a=" + "7" * 5000,
              # Helm 4's whole object: one JSON object merged into the values
              '{"a": {"b": 1}}', ' {"a": 1} ', '{"a": 1},b=2', '{"a": 1}{"b": 2}', "{}", '{"a": null}',
              '{"a.b": 1, "c[0]": 2}', "[1]", '{"a": 1e999}', '{"a": NaN}', '{"a": [1, {"b": 2.5}]}',
              '{"a": {"b": 1}, "a": {"c": 2}}', '{"a": ' + "7" * 5000 + "}", '{"a": 1', "{"]
STRING_LINES = ["a=1", "a=true", "a=null", "a={1,2}", "a[0]=1", "a.b=010"]


def set_corpus(count: int = 200, seed: int = 11) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    pieces = ["a", "b", ".", "=", ",", "[", "]", "{", "}", "\\", "0", "1", "x", "-", "true", "null", "[0]", "[1]"]
    drawn = ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 8))) for _ in range(count)]
    return ([("set", s) for s in SET_LINES + drawn] + [("json", s) for s in JSON_LINES]
            + [("string", s) for s in STRING_LINES])


@pytest.mark.parametrize("kind,line", set_corpus(), ids=lambda x: ascii(x))
def test_set_lines_mean_what_they_mean_to_helm(probe, kind, line):
    from generator import set_values

    theirs = helm("template", "p", str(probe), set_values.FLAGS[kind], line)
    try:
        ours = as_values(set_values.parse_into(line, {}, kind), "probe")
    except UserError as e:
        assert theirs.returncode != 0, f"jaxgen refuses ({e}), Helm reads {theirs.stdout[-300:]}"
        assert "\n" not in str(e)
        return
    assert theirs.returncode == 0, f"Helm refuses ({theirs.stderr.strip()}), jaxgen reads {ours}"
    helm_values = json.loads(theirs.stdout.split("\n", 2)[2])
    assert same(ours, helm_values), (ours, helm_values)


@pytest.mark.parametrize("lines", [('{"a": {"b": 1}}', '{"a": {"c": 2}}'), ('{"a": {"b": 1}}', "a.c=2"),
                                   ("a.x=1", '{"a": {"c": 2}}'), ('{"a": [1]}', '{"a": {"b": 1}}'),
                                   ('{"a": {"b": 1}}', '{"a": null}')], ids=ascii)
def test_set_json_objects_merge_as_in_helm(probe, lines):
    """Several --set-json objects (and key paths) merge into each other in order, as Helm 4 merges them."""
    from generator import set_values

    theirs = helm("template", "p", str(probe), *(token for line in lines for token in ("--set-json", line)))
    ours: dict = {}
    for line in lines:
        ours = as_values(set_values.parse_into(line, ours, "json"), "probe")
    assert theirs.returncode == 0, theirs.stderr
    assert same(ours, json.loads(theirs.stdout.split("\n", 2)[2]))


# Documents whose reading turns on explicit tags, merge keys, directives and keys given twice: jaxgen
# reads each as Helm does, or both refuse it in one line.
YAML_DOCUMENTS = [
    # explicit tags: !!str keeps the text, the others check it, a custom tag is ignored
    "a: !!binary aGVsbG8=\n", "a: !!binary '////'\n", "a: !!binary 7aC9\n", "a: !!binary not-base64!\n",
    "a: !!binary |\n  aGVs\n  bG8=\n", "!!binary aGVsbG8=: x\n", "a: !!timestamp 2024-01-01\n",
    "a: !!timestamp 2024-1-2\n", "a: !!timestamp 2001-12-14t21:59:43.10-05:00\n",
    "a: !!timestamp 2024-01-01T1:2:3.5+01:00\n", "a: !!timestamp 2024-01-01 01:02:03\n",
    "a: !!timestamp 2024-01-01T01:02:03\n", "a: !!timestamp 2024-01-01 01:02:03Z\n",
    "a: !!timestamp 2024-01-01T24:00:00Z\n", "a: !!timestamp 2023-02-29\n", "a: !!timestamp 0000-02-29\n",
    "a: !!timestamp 2024-01-01T01:02:03+0100\n", "a: !!timestamp notatime\n", "a: !!timestamp 2024\n",
    "a: !foo bar\n", "a: !foo 1\n", "a: !foo yes\n", "a: !foo [1, 2]\n", "a: !foo {x: 1}\n", "a: ! 1\n",
    "a: !<tag:yaml.org,2002:str> 1\n", "a: !!python/name:os.system x\n", "a: !!python/object:os.x {}\n",
    "a: !!str 1\n", "a: !!str yes\n", "a: !!str\n", "a: !!str {x: 1}\n", "a: !!int '3'\n", "a: !!int 0x10\n",
    "a: !!int notanint\n", "a: !!int 1.5\n", "a: !!int\n", "a: !!float 3\n", "a: !!float 1e400\n",
    "a: !!float .inf\n", "a: !!float 0x10\n", "a: !!bool yes\n", "a: !!bool Y\n", "a: !!bool maybe\n",
    "a: !!null ''\n", "a: !!null x\n", "a: !!null ~\n", "a: !!set {x, y}\n", "a: !!omap [x: 1, y: 2]\n",
    "a: !!pairs [x: 1]\n", "a: !!map {}\n", "a: !!map [1]\n", "a: !!seq []\n", "a: !!merge x\n",
    "a: !!value x\n", "? !!int 1\n: x\n", "!!str 1: x\n", "a: !!int " + "7" * 5000 + "\n",
    "a: " + "7" * 5000 + "\n", "a: 0x" + "f" * 5000 + "\n", "a: 0" + "7" * 5000 + "\n",
    # merge keys: in document order, the first of a list wins
    "a:\n  <<: [{epochs: 7}, {epochs: 8}]\n", "a:\n  epochs: 1\n  <<: {epochs: 7}\n",
    "a:\n  <<: {epochs: 7}\n  epochs: 1\n", "b: &b {x: 1}\na:\n  <<: *b\n  <<: {x: 2}\n",
    "b: &b {x: 1, y: 2}\na:\n  y: 0\n  <<: [*b, {y: 3, z: 4}]\n  z: 5\n", "a:\n  <<: {<<: {x: 1}, y: 2}\n",
    "a:\n  <<: [{x: 1}, 3]\n", "<<: 1\n", "<<: {a: 1}\n", "a: <<\n", "'<<': 1\n", "a: !!merge <<\n",
    "a:\n  <<: []\n", "a:\n  <<: {}\n  b: 1\n", "a: &a {x: 1}\nb:\n  x: 0\n  <<: [*a, *a]\n",
    # directives
    "%YAML 1.2\n---\na: yes\n", "%YAML 1.1\n---\na: yes\n", "%YAML 2.0\n---\na: 1\n",
    "%TAG !e! tag:example.com,2000:\n---\na: !e!foo x\n", "%FOO bar\n---\na: 1\n", "---\na: 1\n...\n",
    # keys given twice, as the same scalar (two scalars with one text, 1 and "1", Helm keeps at random:
    # jaxgen refuses them, tests/generator/test_cli.py)
    "a: 1\na: 2\n", "1: a\n0x1: b\n", "'a': 1\na: 2\n", "y: 1\nY: 2\n",
]


@pytest.mark.parametrize("text", YAML_DOCUMENTS, ids=lambda text: ascii(text)[:60])
def test_documents_read_as_helm_reads_them(probe, tmp_path, text):
    from generator.values import read_document

    theirs = helm_reads(probe, text, tmp_path)
    try:
        ours = read_document(str(tmp_path / "values.yaml"))
    except UserError as error:
        assert isinstance(theirs, str), f"jaxgen refuses ({error}), Helm reads {theirs}"
        assert "\n" not in str(error)
        return
    assert isinstance(theirs, dict), f"Helm refuses ({theirs}), jaxgen reads {ours}"
    assert same(ours, theirs), (ours, theirs)


# The whole chain, jaxgen render against helm template of the chart: a values file whose fields hold
# scalar edge cases (written plain in YAML), and --set lines aimed at real fields. Both accept and
# render the same documents, or both refuse.
FIELD_TEMPLATES = ["image:\n  tag: {s}\n", "labels:\n  team: {s}\n", "training:\n  seed: {s}\n",
                   "hosts_count: {s}\ntraining:\n  batch_size: 64\n", "annotations:\n  note: {s}\n",
                   "node_selector:\n  {s}: x\n", "queue_name: {s}\n", "data:\n  download: {s}\n"]
FIELD_SCALARS = ["1.10", "010", "0o17", "1_0", "2024-01-01", "1:30:00", "y", "n", "on", "NO", "null", "~", "1e3",
                 "0x1F", "+12", "-0", "3.", "team-a", "v1.2.3", "1.0"]
RENDER_SETS = [("--set", "training.seed=010"), ("--set", "image.tag=1.10"), ("--set", "training.epochs=1_0"),
               ("--set", "hosts_count=2,training.batch_size=64"), ("--set", "labels.a\\.b/c=d"),
               ("--set", "program.command={python3,x.py}"), ("--set", "env[0].name=A,env[0].value=b"),
               ("--set", "tolerations[0].key=k,tolerations[0].operator=Exists"),
               ("--set", "training.learning_rate=0.5"), ("--set-json", "training.learning_rate=0.5"),
               ("--set-string", "image.tag=1.10"), ("--set", "data.download=no"), ("--set", "data.download=false"),
               ("--set", "training.mlp.hidden_sizes={64,64}"), ("--set", "training.mlp.hidden_sizes[1]=32"),
               ("--set-json", 'resources={"limits": {"memory": "2Gi"}}'), ("--set", "name=Bad"),
               ("--set", "annotations.x=1"), ("--set-string", "annotations.x=1"), ("--set", "hosts_count=0x10"),
               ("--set", "queue_name=null"), ("--set", "training.seed=-1"), ("--set", "training.seed=+7")]


def render_cases() -> list[tuple[str, tuple]]:
    cases = [(template.format(s=s), ()) for template in FIELD_TEMPLATES for s in FIELD_SCALARS]
    return cases + [("", option) for option in RENDER_SETS]


@pytest.mark.parametrize("text,option", render_cases(), ids=lambda x: ascii(x)[:40])
def test_jaxgen_render_and_helm_template_agree(tmp_path, text, option):
    from generator.errors import UserError as Refused
    from generator.output import dump_yaml
    from generator.engines.kubernetes import render_documents
    from generator.values import load_values
    from tests.support import kubernetes_yaml

    from .helm import CHART_DIR, comparable

    path = tmp_path / "values.yaml"
    path.write_text(text or "{}\n")
    kinds = {"--set": "sets", "--set-json": "set_jsons", "--set-string": "set_strings"}
    sets = {kinds[option[0]]: [option[1]]} if option else {}
    theirs = helm("template", "r", str(CHART_DIR), "-f", str(path), *option, "--skip-tests")
    try:
        ours = kubernetes_yaml.decode(dump_yaml(render_documents(load_values([str(path)], **sets))))
    except Refused as e:
        assert theirs.returncode != 0, f"jaxgen refuses ({str(e)[:300]}), Helm renders"
        return
    assert theirs.returncode == 0, f"Helm refuses ({theirs.stderr.strip()[-300:]}), jaxgen renders"
    assert comparable(theirs.documents(), "helm") == comparable(ours, "jaxgen")
