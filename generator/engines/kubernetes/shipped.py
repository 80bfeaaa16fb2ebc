"""The pod's parts for code that travels with the job (generator/shipping.py): its ConfigMap, the first
container that unpacks it (shipped/pod-start.py), their volumes, and the trainer container's PYTHONPATH
and working directory. The chart's twin is templates/_shipped.tpl."""

from __future__ import annotations

from ... import shipping
from . import policy

INIT_CONTAINER = "pod-start"
TEMPLATE = "shipped-configmap.yaml.j2"


class Shipped:
    """The template functions; `pod` is the render's PodContext (image, security context, resources)."""

    def __init__(self, values: dict, pod):
        self.v, self.pod = values, pod
        self._config_map: dict | None = None

    def shipped(self) -> bool:
        return shipping.shipped(self.v)

    def config_map(self) -> dict:
        """The ConfigMap's name (after its contents: it is immutable), data and binaryData (base64), for
        templates/shipped-configmap.yaml.j2; packed once per render."""
        if self._config_map is None:
            data, binary = shipping.config_map(self.v)
            name = f"{self.v['name']}-shipped-{shipping.content_digest(data, binary)}"
            self._config_map = {"name": name, "data": data, "binary": binary}
        return self._config_map

    def init_containers(self) -> list[dict]:
        resources = {part: {name: value for name, value in amounts.items() if name != policy.GPU_RESOURCE}
                     for part, amounts in self.pod.container_resources().items()}
        pip_args = list(self.v["image"]["pip_args"]) if shipping.stock(self.v) else []
        container = {"name": INIT_CONTAINER, "image": self.pod.image(), "imagePullPolicy": self.pod.pull_policy(),
                     "command": ["python", f"{shipping.SHIPPED_DIR}/pod-start.py", shipping.SHIPPED_DIR,
                                 shipping.RUN_DIR, *pip_args],
                     "env": [{"name": "HOME", "value": "/tmp"}, {"name": "PYTHONNOUSERSITE", "value": "1"}]}
        if any(resources.values()):
            container["resources"] = {part: amounts for part, amounts in resources.items() if amounts}
        container["securityContext"] = self.pod.container_security_context()
        container["volumeMounts"] = [{"name": shipping.VOLUME, "mountPath": shipping.SHIPPED_DIR, "readOnly": True},
                                     {"name": shipping.RUN_VOLUME, "mountPath": shipping.RUN_DIR},
                                     {"name": "tmp", "mountPath": "/tmp"}]
        return [container]

    def env(self) -> list[dict]:
        """PYTHONPATH of the trainer's container: the unpacked trainer and packages on a stock image (the
        built image's trainer otherwise), and sitecustomize.py with a program folder."""
        paths = [shipping.RUN_DIR, f"{shipping.RUN_DIR}/packages"] if shipping.stock(self.v) \
            else [shipping.BUILT_PYTHONPATH]
        if self.v["program"]["dir"]:
            paths.append(shipping.SHIPPED_DIR)
        return [{"name": "PYTHONPATH", "value": ":".join(paths)}]

    def mounts(self) -> list[dict]:
        return [{"name": shipping.VOLUME, "mountPath": shipping.SHIPPED_DIR, "readOnly": True},
                {"name": shipping.RUN_VOLUME, "mountPath": shipping.RUN_DIR}]

    def volumes(self) -> list[dict]:
        return [{"name": shipping.VOLUME, "configMap": {"name": self.config_map()["name"]}},
                {"name": shipping.RUN_VOLUME, "emptyDir": {}}]

    def working_dir(self) -> str:
        return f"{shipping.RUN_DIR}/program" if self.v["program"]["dir"] else ""

    def globals(self) -> dict:
        return {"shipped": self.shipped, "shipped_config_map": self.config_map,
                "shipped_init_containers": self.init_containers, "shipped_env": self.env,
                "shipped_mounts": self.mounts, "shipped_volumes": self.volumes,
                "shipped_working_dir": self.working_dir}
