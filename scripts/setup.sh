#!/usr/bin/env bash
# Create .venv, install the pinned requirements and the project (editable); idempotent: a second run is quick.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
# NERBIAS_EXTRAS=flair also installs requirements-flair.txt (tagger=flair; scripts/test.sh asks for it).
files=(requirements.txt)
for extra in ${NERBIAS_EXTRAS:-}; do
  [ -f "requirements-$extra.txt" ] || { echo "setup.sh: no requirements-$extra.txt for NERBIAS_EXTRAS=$extra" >&2; exit 2; }
  files+=("requirements-$extra.txt")
done
stamp=.venv/.requirements.sha256
want=$(cat "${files[@]}" | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet $(printf -- '-r %s ' "${files[@]}")
  echo "$want" > "$stamp"
fi
# The project itself, editable: scripts, benchmarks and notebooks import nerbias from here. Installed
# again when pyproject.toml changed, so its console scripts (nerbias-aggregate, nerbias-study) follow
# the modules they name. (Checked from / so that the working directory on sys.path does not count.)
root=$PWD
project_stamp=.venv/.project.sha256
project_want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if ! (cd / && "$root/.venv/bin/python" -c "import nerbias, sys; sys.exit(0 if nerbias.__file__.startswith('$root/') else 1)") 2>/dev/null \
    || [ ! -f "$project_stamp" ] || [ "$(cat "$project_stamp")" != "$project_want" ]; then
  rm -f "$project_stamp"
  log=$(mktemp)
  if ! .venv/bin/python -m pip install --quiet --no-deps --no-build-isolation -e . > "$log" 2>&1; then
    grep -v "^WARNING: Location" "$log" >&2; rm -f "$log"
    echo "error: pip install -e . failed (above); the project is not installed in .venv" >&2
    exit 1
  fi
  rm -f "$log"
  echo "$project_want" > "$project_stamp"
fi
