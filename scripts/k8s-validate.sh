#!/usr/bin/env bash
# Validates the Kubernetes manifests under deploy/kubernetes/ (or the files
# and directories given as arguments) against Kubernetes' own JSON schemas,
# offline: no cluster, no network once installed. The schemas come inside
# the PyPI package kubernetes-validate, installed on first use into a venv
# under ${XDG_CACHE_HOME:-$HOME/.cache}/autoperf/k8s-venv.
#
#   bash scripts/k8s-validate.sh                     # every deploy/kubernetes/*.yaml
#   bash scripts/k8s-validate.sh path/to/file.yaml   # just these
#
# Each file must parse as YAML without duplicate keys, hold at least one
# object, give every object a kind, an apiVersion and a name (and a
# namespace, but for the Namespace itself: the manifests apply without -n),
# and validate in strict mode (unknown fields are errors) against every
# Kubernetes version in K8S_VERSIONS. A kind the schemas do not know (a
# misspelt apiVersion, a CRD) fails too. Exits 1 naming each failed file.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
REQUIREMENT="kubernetes-validate==1.37.0"
# The oldest Kubernetes the manifests are meant for and the newest this
# kubernetes-validate ships schemas for (it has 1.25 to 1.37): a field
# missing from the first or an API removed by the second fails.
K8S_VERSIONS=(1.30.0 1.37.0)
VENV="${XDG_CACHE_HOME:-$HOME/.cache}/autoperf/k8s-venv"
STAMP="$VENV/.installed"

if [[ ! -f "$STAMP" || "$(cat "$STAMP")" != "$REQUIREMENT" ]]; then
    mkdir -p "$(dirname "$VENV")"
    # Concurrent callers: one installs, the others wait for it.
    exec 9>"$VENV.lock"
    flock 9
    if [[ ! -f "$STAMP" || "$(cat "$STAMP")" != "$REQUIREMENT" ]]; then
        [[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
        "$VENV/bin/pip" install -q --disable-pip-version-check "$REQUIREMENT" >&2
        echo "$REQUIREMENT" >"$STAMP"
    fi
    exec 9>&-
fi

targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=("$ROOT/deploy/kubernetes")
files=()
for target in "${targets[@]}"; do
    if [[ -d "$target" ]]; then
        while IFS= read -r -d '' file; do
            files+=("$file")
        done < <(find "$target" -type f \( -name '*.yaml' -o -name '*.yml' \) -print0 | sort -z)
    elif [[ -f "$target" ]]; then
        files+=("$target")
    else
        echo "k8s-validate: no such file or directory: $target" >&2
        exit 2
    fi
done
if [[ ${#files[@]} -eq 0 ]]; then
    echo "k8s-validate: no YAML files in ${targets[*]}" >&2
    exit 2
fi

version_args=()
for version in "${K8S_VERSIONS[@]}"; do
    version_args+=(-k "$version")
done

# What kubernetes-validate does not check: YAML that PyYAML accepts but
# kubectl refuses (a key given twice), empty files, objects without a name
# or namespace.
precheck() {
    "$VENV/bin/python" - "$1" "$2" <<'PY'
import sys
import yaml

class Loader(yaml.SafeLoader):
    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, "duplicate key %r" % (key,), key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

path, shown = sys.argv[1], sys.argv[2]
try:
    with open(path) as f:
        docs = [d for d in yaml.load_all(f, Loader=Loader) if d is not None]
except yaml.YAMLError as e:
    sys.exit("ERROR %s: %s" % (shown, " ".join(str(e).split())))
if not docs:
    sys.exit("ERROR %s: no Kubernetes object in it" % shown)
for i, doc in enumerate(docs):
    where = "%s (object %d)" % (shown, i + 1)
    if not isinstance(doc, dict):
        sys.exit("ERROR %s: not a mapping" % where)
    for key in ("apiVersion", "kind"):
        if not isinstance(doc.get(key), str):
            sys.exit("ERROR %s: no %s" % (where, key))
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or not meta.get("name"):
        sys.exit("ERROR %s: no metadata.name" % where)
    if doc["kind"] != "Namespace" and not meta.get("namespace"):
        sys.exit("ERROR %s: %s/%s has no metadata.namespace"
                 % (where, doc["kind"], meta["name"]))
PY
}

failed=()
for file in "${files[@]}"; do
    name="${file#"$ROOT"/}"
    if ! precheck "$file" "$name"; then
        failed+=("$name")
        continue
    fi
    # kubernetes-validate exits 0 on a kind it has no schema for (a WARN
    # line): anything but INFO lines is a failure here.
    set +e
    output="$("$VENV/bin/kubernetes-validate" --strict "${version_args[@]}" "$file" 2>&1)"
    status=$?
    set -e
    printf '%s\n' "$output" | sed "s|$ROOT/||g"
    if [[ $status -ne 0 ]] || grep -qv '^INFO ' <<<"$output"; then
        failed+=("$name")
    fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
    echo "k8s-validate: FAILED (strict, Kubernetes ${K8S_VERSIONS[*]}): ${failed[*]}" >&2
    exit 1
fi
echo "k8s-validate: ${#files[@]} files valid (strict, Kubernetes ${K8S_VERSIONS[*]}, $REQUIREMENT)"
