"""Hostile strings in free-text fields land as the intended value and cannot change the structure."""

import json

import pytest

from tests.support.jaxgen import jaxgen

PAYLOADS = [
    'say "hi" and \'bye\'',
    "line one\nline two: still text\n- not a list",
    "{{ .Values.name }} {% raw %}{{ name }}{% endraw %} ${HOME} $(id)",
    "key: value",
    "# not a comment",
    "- leading dash",
    "---\napiVersion: v1\nkind: Secret",
    "&anchor *alias !!python/object:os.system",
    "[1, 2] {a: b}",
    "\\u0041 \\n \\\\ \t tab",
    "",
    "yes",
    "null",
    "0x10",
]

# field path in the variables → where its value must land in the rendered Job's pod template
FIELDS = {
    "annotation": (lambda p: {"annotations": {"example.com/note": p}},
                   lambda job: job["spec"]["template"]["metadata"]["annotations"]["example.com/note"]),
    "env value": (lambda p: {"env": [{"name": "NOTE", "value": p}]},
                  lambda job: job["spec"]["template"]["spec"]["containers"][0]["env"][-1]["value"]),
    "volume source path": (lambda p: {"checkpoint": {"volume": {"hostPath": {"path": "/x" + p}}}},
                           lambda job: job["spec"]["template"]["spec"]["volumes"][1]["hostPath"]["path"][2:]),
    "toleration value": (lambda p: {"tolerations": [{"key": "k", "operator": "Equal", "value": p}]},
                         lambda job: job["spec"]["template"]["spec"]["tolerations"][0]["value"]),
}
# fields whose schema forbids newlines still take every other payload verbatim
ONE_LINE_FIELDS = {
    "data dir": (lambda p: {"data": {"dir": "/d/" + p}},
                 lambda job: job["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["mountPath"][3:]),
    "checkpoint dir (in args)": (lambda p: {"checkpoint": {"dir": "/c/" + p}},
                                 lambda job: _arg(job, "--checkpoint-dir")[3:]),
}


def _arg(job, flag):
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    return args[args.index(flag) + 1]


def _render(values):
    result = jaxgen("render", "-", stdin=json.dumps(values))
    assert result.exit_code == 0, result.stderr
    return result.documents()


def _shape(node):
    """The structure of a document: its keys and list lengths, without scalar values."""
    if isinstance(node, dict):
        return {k: _shape(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_shape(v) for v in node]
    return type(node).__name__


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("field", sorted(FIELDS))
def test_free_text_is_data(field, payload):
    make, extract = FIELDS[field]
    baseline = _render(make("plain"))
    docs = _render(make(payload))
    assert [d["kind"] for d in docs] == ["Service", "Job", "NetworkPolicy"]
    assert extract(docs[1]) == payload
    assert _shape(docs) == _shape(baseline)


@pytest.mark.parametrize("payload", [p for p in PAYLOADS if "\n" not in p and p])
@pytest.mark.parametrize("field", sorted(ONE_LINE_FIELDS))
def test_one_line_fields_are_data(field, payload):
    make, extract = ONE_LINE_FIELDS[field]
    docs = _render(make(payload))
    assert extract(docs[1]) == payload
    assert _shape(docs) == _shape(_render(make("plain")))


@pytest.mark.parametrize("field", sorted(ONE_LINE_FIELDS))
def test_newlines_are_rejected_where_the_schema_forbids_them(field):
    make, _ = ONE_LINE_FIELDS[field]
    result = jaxgen("render", "-", stdin=json.dumps(make("a\nkind: Secret")))
    assert result.exit_code == 2
    assert "dir" in result.stderr
