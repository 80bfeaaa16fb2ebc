"""Write the models' part of variables/schema.json from the model registry (trainer/models):
training.model's enum and each model's settings object training.<model>, placed after
training.model. The rest of the schema is written by hand.

Usage: python scripts/model-schema.py [--check]   (make sync-schema runs it)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SCHEMA = ROOT / "variables" / "schema.json"

from trainer import models  # noqa: E402


def with_models(schema: dict) -> dict:
    training = schema["properties"]["training"]
    fragment = models.schema_fragment()
    # what an earlier run wrote (a model since removed too)
    generated = set(fragment) | {key for key, prop in training["properties"].items()
                                 if prop.get("$comment") == models.GENERATED}

    def place(keys):
        out = []
        for key in keys:
            if key == "model":
                out += list(fragment)
            elif key not in generated:
                out.append(key)
        return out

    training["required"] = place(training["required"])
    training["properties"] = {key: fragment.get(key) or training["properties"][key]
                              for key in place(training["properties"])}
    return schema


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only check that the schema holds them")
    args = parser.parse_args()
    text = SCHEMA.read_text()
    wanted = json.dumps(with_models(json.loads(text)), indent=2, ensure_ascii=False) + "\n"
    if args.check:
        if text != wanted:
            sys.exit(f"{SCHEMA}: its models' part is out of date: run make sync-schema")
        return
    SCHEMA.write_text(wanted)


if __name__ == "__main__":
    main()
