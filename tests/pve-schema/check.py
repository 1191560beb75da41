#!/usr/bin/env python3
"""Checks simulator request logs against PVE's published API schema.

The schema is the PyPI package clientapi-pve (tests/requirements.txt), an OpenAPI-generator
client generated from PVE's apidoc.js. For every line of every log given (the simulator's
request log, docs/proxmox.md "Request log"):

* the method and path must be an endpoint of the schema (the `resource_path` of a
  generated `_<name>_serialize`);
* every parameter must be one the endpoint accepts (path, query or body) and its value,
  decoded from the wire form, must have the type the schema allows;
* a 2xx answer's `{"data": ...}` must deserialize into the endpoint's 200 response model,
  the way the generated client deserializes it (`Model.from_dict`, strict pydantic types).

Prints the endpoints seen with their counts and every mismatch; exits 1 on any.

    python tests/pve-schema/check.py LOG.jsonl [LOG.jsonl ...]

The package's top-level `__init__` imports all ~1500 models (12 s); we register bare
package modules instead, so only the models of the endpoints seen are imported, and we read
the generated API modules with `ast` instead of importing them.
"""

import argparse
import ast
import enum
import importlib
import importlib.util
import json
import re
import sys
import types
import typing
from collections import Counter
from pathlib import Path

PACKAGE = "clientapi_pve"

# Mismatches that are defects of the schema (apidoc.js under-documents some returns),
# not of us: (method, resource_path, where, field) -> why it is allowed.
# `where` is "param" or "response"; `field` is the parameter or the first element of
# pydantic's error location.
ALLOWED: dict[tuple[str, str, str, str], str] = {
    ("GET", "/cluster/nextid", "response", "data"): (
        "apidoc.js declares the returned id an integer, but PVE's handler returns it as a"
        " Perl string and pveproxy sends {\"data\": \"100\"}; the simulator copies that"
        " (docs/proxmox.md, Behaviour: Views) and our client reads string or number"
    ),
}

SERIALIZE = re.compile(
    r"def _(\w+)_serialize\(.*?method='(\w+)',\s*resource_path='([^']+)'", re.S
)


def package_root() -> Path:
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"{PACKAGE} is not installed (pip install -r tests/requirements.txt)")
    return Path(next(iter(spec.submodule_search_locations)))


def stub_packages(root: Path) -> None:
    for name, sub in ((PACKAGE, root), (f"{PACKAGE}.models", root / "models")):
        module = types.ModuleType(name)
        module.__path__ = [str(sub)]
        sys.modules[name] = module


class Endpoint:
    """One method + resource_path, read from its generated API module."""

    def __init__(self, method: str, template: str, module: Path, name: str):
        self.method = method
        self.template = template
        self.module = module
        self.name = name
        parts = re.split(r"(\{[^}/]+\})", template)
        self.names = [p[1:-1] for p in parts if p.startswith("{")]
        pattern = "".join("([^/]+)" if p.startswith("{") else re.escape(p) for p in parts)
        self.regex = re.compile(f"^{pattern}$")
        # The volume id of `.../content/{volume}` is "the rest of the URI" (its `/` raw).
        self.tail_regex = (
            re.compile(f"^{pattern[: -len('([^/]+)')]}(.+)$") if template.endswith("}") else None
        )
        self.literals = len(re.sub(r"\{[^}/]+\}", "", template))
        self._signature = None

    def match(self, path: str, tail: bool):
        regex = self.tail_regex if tail else self.regex
        m = regex.match(path) if regex else None
        return dict(zip(self.names, m.groups())) if m else None

    def signature(self, schema: "Schema"):
        if self._signature is None:
            self._signature = schema.read_signature(self)
        return self._signature


class Signature:
    """What an endpoint accepts and returns."""

    def __init__(self):
        self.path: dict[str, typing.Any] = {}  # wire name -> annotation
        self.query: dict[str, typing.Any] = {}  # wire name (query and form) -> annotation
        self.untyped: set[str] = set()  # query parameters the schema gives no type
        self.body = None  # request model class
        self.response = None  # 200 response model class


class Schema:
    def __init__(self, root: Path):
        self.root = root
        self.endpoints: dict[str, list[Endpoint]] = {}
        for module in sorted((root / "api").glob("*_api.py")):
            for name, method, template in SERIALIZE.findall(module.read_text()):
                self.endpoints.setdefault(method, []).append(
                    Endpoint(method, template, module, name)
                )
        for candidates in self.endpoints.values():
            # Prefer the most specific template (`.../status/current` over `.../{x}`).
            candidates.sort(key=lambda e: -e.literals)
        self._trees: dict[Path, tuple[ast.Module, dict[str, str]]] = {}

    def find(self, method: str, path: str):
        for tail in (False, True):
            for endpoint in self.endpoints.get(method, []):
                values = endpoint.match(path, tail)
                if values is not None:
                    return endpoint, values
        return None, None

    def _tree(self, module: Path):
        if module not in self._trees:
            tree = ast.parse(module.read_text())
            imports = {
                alias.asname or alias.name: node.module
                for node in tree.body
                if isinstance(node, ast.ImportFrom) and node.module
                for alias in node.names
            }
            self._trees[module] = (tree, imports)
        return self._trees[module]

    def _eval(self, annotation: ast.expr, imports: dict[str, str]):
        namespace = {}
        for node in ast.walk(annotation):
            if isinstance(node, ast.Name) and node.id in imports:
                module = importlib.import_module(imports[node.id])
                namespace[node.id] = getattr(module, node.id)
        return eval(compile(ast.Expression(annotation), "<annotation>", "eval"), namespace)

    def read_signature(self, endpoint: Endpoint) -> Signature:
        tree, imports = self._tree(endpoint.module)
        functions = {
            f.name: f
            for cls in tree.body
            if isinstance(cls, ast.ClassDef)
            for f in cls.body
            if isinstance(f, ast.FunctionDef)
        }
        public = functions[endpoint.name]
        serialize = functions[f"_{endpoint.name}_serialize"]
        sig = Signature()
        args = {
            a.arg: a.annotation
            for a in public.args.args
            if a.arg != "self" and not a.arg.startswith("_")
        }
        for node in ast.walk(serialize):
            # _path_params['vmid'] = vmid
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.targets[0], ast.Subscript)
                and isinstance(node.targets[0].value, ast.Name)
                and node.targets[0].value.id == "_path_params"
            ):
                wire = node.targets[0].slice.value
                sig.path[wire] = self._eval(args[node.value.id], imports)
            # _query_params.append(('type', type.value)) and _form_params likewise
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "append"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in ("_query_params", "_form_params")
            ):
                key, value = node.args[0].elts
                var = value.value.id if isinstance(value, ast.Attribute) else value.id
                annotation = self._eval(args[var], imports)
                sig.query[key.value] = annotation
                if annotation_is_any(annotation):
                    sig.untyped.add(key.value)
            # _body_params = qemu_clone_vm_request
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "_body_params"
                and isinstance(node.value, ast.Name)
            ):
                sig.body = model_of(self._eval(args[node.value.id], imports))
        for node in ast.walk(public):
            # _response_types_map = {'200': "QemuCloneVmResponse", ...}
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and node.target.id == "_response_types_map"
            ):
                for k, v in zip(node.value.keys, node.value.values):
                    if k.value == "200" and isinstance(v, ast.Constant) and v.value:
                        module = importlib.import_module(imports[v.value])
                        sig.response = getattr(module, v.value)
                break
        return sig


def unwrap(annotation):
    """The types an annotation allows, without Optional/Annotated wrappers."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return unwrap(typing.get_args(annotation)[0])
    if origin is typing.Union:
        return [t for a in typing.get_args(annotation) for t in unwrap(a)]
    return [annotation]


def annotation_is_any(annotation) -> bool:
    return any(t is typing.Any for t in unwrap(annotation))


def model_of(annotation):
    return next(t for t in unwrap(annotation) if t is not type(None))


INT = re.compile(r"^-?\d+$")
FLOAT = re.compile(r"^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def is_wrapper(t) -> bool:
    """A oneOf wrapper (e.g. PveQemuNetField: a property string or its parsed form), which
    pydantic does not build from the plain value; the generated client does (from_dict)."""
    return isinstance(t, type) and "actual_instance" in getattr(t, "model_fields", {})


def is_model(t) -> bool:
    return isinstance(t, type) and hasattr(t, "model_fields") and not is_wrapper(t)


def coerce(allowed, value: str):
    """A wire string as the scalar type the annotation wants; unchanged when it does not
    fit, so that pydantic reports it."""
    ints = any(
        t is int or (isinstance(t, type) and issubclass(t, int) and issubclass(t, enum.Enum))
        for t in allowed
    )
    if ints and INT.match(value):
        return int(value)
    if float in allowed and FLOAT.match(value):
        return float(value)
    if bool in allowed and value in ("0", "1"):
        return value == "1"
    return value


def prepare(annotation, value, wire: bool):
    """`value` ready for pydantic's strict validation against `annotation`: oneOf wrappers
    built, nested models and containers walked, and, for `wire` (form and query values),
    strings decoded to the scalar type wanted. Response data (`wire` false) keeps its JSON
    types, so the response check is a real type check. A wrapper that matches none of its
    schemas raises ValueError."""
    allowed = [t for t in unwrap(annotation) if t is not type(None)]
    if wire and isinstance(value, (int, float)) and not isinstance(value, bool):
        # A number in a JSON body (go-proxmox sends `{"memory": 4096}`) is a plain Perl
        # scalar to PVE's JSONSchema, valid for string parameters too: check it as the
        # string it is on the wire, which coerce() turns back into a number where one is wanted.
        value = str(value)
    for t in allowed:
        origin = typing.get_origin(t)
        if is_wrapper(t) and value is not None:
            return t.from_dict(value)
        if is_model(t) and isinstance(value, dict):
            out = {}
            for key, item in value.items():
                field = model_field(t, key)
                out[key] = item if field is None else prepare(field, item, wire)
            return out
        if origin is list and isinstance(value, list):
            return [prepare(typing.get_args(t)[0], v, wire) for v in value]
        if origin is dict and isinstance(value, dict):
            item = typing.get_args(t)[1]
            return {k: prepare(item, v, wire) for k, v in value.items()}
    if wire and isinstance(value, str):
        return coerce(allowed, value)
    return value


def model_field(model, key: str):
    """The annotation of the field `key`, or of a member of the indexed family it belongs
    to (`net3` of `nets: Dict[int, PveQemuNetField]`), or None."""
    for name, field in model.model_fields.items():
        if key in (name, field.alias):
            return field.annotation
    for name, field in model.model_fields.items():
        family = re.fullmatch(r"(\w+?)s", name)
        if family and re.fullmatch(rf"{family[1]}\d+", key):
            members = [t for t in unwrap(field.annotation) if typing.get_origin(t) is dict]
            return typing.get_args(members[0])[1] if members else field.annotation
    return None


def body_names(model) -> set[str]:
    return set(getattr(model, f"_{model.__name__}__properties", [])) | {
        f.alias or n for n, f in model.model_fields.items()
    }


def errors_of(exc: Exception):
    if hasattr(exc, "errors"):
        for e in exc.errors():
            loc = ".".join(str(x) for x in e.get("loc", ())) or "-"
            got = json.dumps(e.get("input"), default=str)
            if len(got) > 120:
                got = got[:117] + "..."
            yield loc, f"{e.get('msg')} (got {got})"
    else:
        yield "-", str(exc).splitlines()[0][:300]


class Checker:
    def __init__(self, schema: Schema):
        self.schema = schema
        self.seen: Counter = Counter()
        self.mismatches: list[str] = []
        self.allowed: Counter = Counter()
        self.untyped: Counter = Counter()

    def mismatch(self, where: str, entry: dict, endpoint, kind: str, field: str, message: str):
        key = (entry["method"], endpoint.template if endpoint else "", kind, field)
        if key in ALLOWED:
            self.allowed[key] += 1
            return
        self.mismatches.append(
            f"{where}: {entry['method']} {entry['path']} [{entry['status']}]"
            f" {kind} {field}: {message}"
        )

    def check(self, where: str, entry: dict):
        endpoint, path_values = self.schema.find(entry["method"], entry["path"])
        if endpoint is None:
            self.mismatch(where, entry, None, "endpoint", "-", "no such endpoint in the schema")
            return
        self.seen[f"{endpoint.method} {endpoint.template}"] += 1
        sig = endpoint.signature(self.schema)
        self.check_params(where, entry, endpoint, sig, path_values)
        if 200 <= entry["status"] < 300 and sig.response is not None:
            # Not the generated from_dict: it passes every absent field as None or its
            # default, which the indexed families (`nets`) and some defaults then fail.
            try:
                data = prepare(sig.response, {"data": entry.get("data")}, wire=False)
                sig.response.model_validate(data)
            except Exception as exc:  # pydantic's ValidationError or a oneOf ValueError
                for loc, message in errors_of(exc):
                    # The first named element below `data` (`data.0.vmid` -> `vmid`).
                    parts = loc.split(".")
                    named = [p for p in parts[1:] if not p.isdigit()]
                    field = named[0] if named else parts[0]
                    self.mismatch(where, entry, endpoint, "response", field, f"{loc}: {message}")

    def check_value(self, where, entry, endpoint, name, annotation, value):
        from pydantic import TypeAdapter

        try:
            TypeAdapter(annotation).validate_python(prepare(annotation, value, wire=True))
        except Exception as exc:  # pydantic's ValidationError or a validator's ValueError
            for _, message in errors_of(exc):
                self.mismatch(where, entry, endpoint, "param", name, message)

    def check_params(self, where, entry, endpoint, sig, path_values):
        for name, value in path_values.items():
            self.check_value(where, entry, endpoint, name, sig.path.get(name), value)
        body = {}
        for name, value in entry["params"].items():
            if name in sig.query:
                if name in sig.untyped:
                    self.untyped[f"{endpoint.method} {endpoint.template} {name}"] += 1
                else:
                    self.check_value(where, entry, endpoint, name, sig.query[name], value)
            elif sig.body is not None and name in body_names(sig.body):
                try:
                    body[name] = prepare(model_field(sig.body, name), value, wire=True)
                except ValueError as exc:
                    self.mismatch(where, entry, endpoint, "param", name, str(exc)[:300])
            else:
                self.mismatch(where, entry, endpoint, "param", name, "not a parameter of the endpoint")
        if sig.body is not None and body:
            try:
                sig.body.model_validate(body)
            except Exception as exc:
                for loc, message in errors_of(exc):
                    self.mismatch(where, entry, endpoint, "param", loc.split(".")[0], message)

    def report(self) -> str:
        lines = [f"PVE schema check: {sum(self.seen.values())} requests, {len(self.seen)} endpoints"]
        width = max((len(k) for k in self.seen), default=0)
        lines += [f"  {k:<{width}}  {n}" for k, n in sorted(self.seen.items())]
        if self.untyped:
            lines.append("not type-checked (the schema types these query parameters as Any):")
            lines += [f"  {k}  {n}" for k, n in sorted(self.untyped.items())]
        if self.allowed:
            lines.append("allowed (schema defects, see ALLOWED in check.py):")
            lines += [f"  {' '.join(k)}  {n}: {ALLOWED[k]}" for k, n in sorted(self.allowed.items())]
        if self.mismatches:
            lines.append(f"{len(self.mismatches)} MISMATCHES:")
            lines += [f"  {m}" for m in self.mismatches]
        else:
            lines.append("no mismatches")
        return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logs", nargs="+", type=Path, help="request logs (JSON lines)")
    args = parser.parse_args()
    root = package_root()
    stub_packages(root)
    checker = Checker(Schema(root))
    for log in args.logs:
        for number, line in enumerate(log.read_text().splitlines(), 1):
            if line.strip():
                checker.check(f"{log.name}:{number}", json.loads(line))
    print(checker.report())
    return 1 if checker.mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
