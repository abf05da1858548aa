# Sourced by .ci/run, scripts/ci/install.sh and test/python/setup.sh: the CI cache outside the
# checkout, reused by later clones (the nats CLI, Python venvs), and venv_link.
#   COHORT_CI_CACHE  the cache dir   default ${XDG_CACHE_HOME:-$HOME/.cache}/cohort-ci
COHORT_CI_CACHE="${COHORT_CI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cohort-ci}"
export COHORT_CI_CACHE
mkdir -p "$COHORT_CI_CACHE/bin" "$COHORT_CI_CACHE/venvs"
case ":$PATH:" in *":$COHORT_CI_CACHE/bin:"*) ;; *) export PATH="$COHORT_CI_CACHE/bin:$PATH" ;; esac

# venv_link LINK REQUIREMENTS [LABEL]: make LINK (e.g. test/infra/.venv) a link to a venv in the cache
# keyed on the hash of REQUIREMENTS and the Python version; the venv is built (pip install -r) only
# when no complete one with that key exists. A directory at LINK (an older in-place venv) is replaced.
venv_link() {
  local link="$1" req="$2" label="${3:-$(basename "$(dirname "$1")")}" key dir
  key=$( { sha256sum "$req" | cut -d' ' -f1; python3 -c 'import sys; print(sys.version)'; } | sha256sum | cut -c1-16)
  dir="$COHORT_CI_CACHE/venvs/$label-$key"
  (
    # One builder per venv at a time (two CI runs of later clones may start together).
    exec 9>"$dir.lock"
    flock 9
    if [ ! -f "$dir/.complete" ]; then
      echo "ci: building venv $label ($req) in $dir"
      rm -rf "$dir"
      python3 -m venv "$dir"
      "$dir/bin/pip" install -q --disable-pip-version-check -r "$req"
      touch "$dir/.complete"
    fi
  )
  if [ -d "$link" ] && [ ! -L "$link" ]; then
    rm -rf "$link"
  fi
  ln -sfn "$dir" "$link"
}
