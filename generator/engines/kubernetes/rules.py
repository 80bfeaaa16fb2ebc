"""The Kubernetes targets' rules that the rule vocabulary can say (generator/rules.py): jaxgen runs
them through checks.py, and `make generate` compiles them into the chart's templates/_rules.tpl. The
rules it cannot say are checks.py's, with their twins in the chart's templates/_validate.tpl."""

from __future__ import annotations

from ...images import default_repository
from ...rules import And, Default, Eq, Fact, Gt, Int, Items, Keys, Len, Not, Or, Present, Row, Rule, Text

_PORT, _MONITOR = Int("metrics.port"), Present("metrics.pod_monitor")
_STOCK = Eq(Text("image.source"), "stock")
_DEFAULT_REPOSITORY = Eq(Text("image.repository"), Fact("defaultImageRepository", default_repository()))
_CLAIM = Or(Present("persistence.existing_claim"), Present("persistence.enabled"))  # names.outputs_claim
_KUBERNETES = "kubernetes"
# An archive in the examples: Helm needs one to reach the rules (jaxgen makes its own and ignores it).
_ARCHIVE = "aGVsbG8="


def _one_source(field: str) -> Rule:
    volume = Items(f"{field}.volume")
    return Rule(f"$.{field}.volume", Gt(Len(volume), 1), "give exactly one volume source, got %s", (Keys(volume),),
                _KUBERNETES, example={field: {"volume": {"emptyDir": {}, "hostPath": {"path": "/x"}}}})


RULES = (
    Rule("$.data.volume", And(Not(Present("data.download")), Not(Present("data.volume"))),
         "with data.download false the data must come from a volume (set data.volume, or data.download true)",
         engine=_KUBERNETES, example={"data": {"download": False}}),
    _one_source("data"),
    _one_source("checkpoint"),
    Rule("$.persistence", And(_CLAIM, Present("checkpoint.volume")),
         "the claim is mounted at checkpoint.dir, and so is checkpoint.volume; set only one of them",
         engine=_KUBERNETES, example={"persistence": {"enabled": True}, "checkpoint": {"volume": {"emptyDir": {}}}}),
    Rule("$.persistence.access_mode",
         And(Not(Present("persistence.existing_claim")), Present("persistence.enabled"),
             Eq(Text("persistence.access_mode"), "ReadWriteOncePod"), Gt(Int("hosts_count"), 1)),
         "ReadWriteOncePod lets one pod mount the claim, but all %d pods mount it (use ReadWriteMany, or "
         "ReadWriteOnce with every pod on one node)", (Int("hosts_count"),), _KUBERNETES,
         example={"persistence": {"enabled": True, "access_mode": "ReadWriteOncePod"}}),
    Rule("$.metrics.port", And(Present("metrics.port"), Eq(_PORT, Default(Row("enginePort"), Int("coordinator_port")))),
         "%d is the coordinator's port; choose another", (_PORT,), _KUBERNETES,
         example={"metrics": {"port": 3389}, "coordinator_port": 3389}),
    Rule("$.metrics.pod_monitor", And(_MONITOR, Not(Present("metrics.port"))),
         "needs metrics.port (the PodMonitor scrapes it)", engine=_KUBERNETES,
         example={"metrics": {"pod_monitor": True, "port": 0}}),
    Rule("$.metrics.pod_monitor",
         And(_MONITOR, Present("metrics.port"), Row("runtimeJob"), Not(Present("trainjob.own_runtime"))),
         "a PodMonitor scrapes a declared container port, which a TrainJob's runtime patch cannot declare; set "
         "trainjob.own_runtime true (its runtime declares it), or scrape through the pods' prometheus.io annotations",
         engine=_KUBERNETES, example={"target": "trainjob", "metrics": {"pod_monitor": True, "port": 9090}}),
    # code that travels with the job (generator/shipping.py) needs a first container in the pods we write
    Rule("$.image.source", And(Eq(Text("image.source"), "stock"), Row("runtimeJob")),
         "stock needs a target whose object holds the pod (indexed-job, jobset, jaxjob): a TrainJob's runtime "
         "makes its pods, with no container to install the trainer first", engine=_KUBERNETES,
         example={"target": "trainjob", "image": {"source": "stock", "trainer_archive": _ARCHIVE}}),
    # a stock image is the default one (repository and tag left alone) or the user's, named in full
    Rule("$.image.tag", And(_STOCK, Not(_DEFAULT_REPOSITORY), Not(Present("image.tag")), Not(Present("image.digest"))),
         "a stock image of your own (image.repository %s) needs image.tag or image.digest: an empty tag is this "
         "project's build's", (Text("image.repository"),), _KUBERNETES,
         example={"image": {"source": "stock", "repository": "python", "trainer_archive": _ARCHIVE}}),
    Rule("$.image.repository", And(_STOCK, _DEFAULT_REPOSITORY, Or(Present("image.tag"), Present("image.digest"))),
         "image.tag and image.digest name an image of image.repository, still this project's own build: with "
         "stock set image.repository too, or neither for the default stock image", engine=_KUBERNETES,
         example={"image": {"source": "stock", "tag": "3.12-slim", "trainer_archive": _ARCHIVE}}),
    Rule("$.program.dir", And(Present("program.dir"), Row("runtimeJob")),
         "a program folder needs a target whose object holds the pod (indexed-job, jobset, jaxjob): a TrainJob's "
         "runtime makes its pods, with no container to unpack it first", engine=_KUBERNETES,
         example={"target": "trainjob", "program": {"command": ["python", "train.py"], "dir": ".",
                                                     "archive": _ARCHIVE}}),
)
