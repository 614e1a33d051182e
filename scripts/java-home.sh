# Sourced by ./granary, scripts/test.sh and .ci/run: sets JAVA_HOME to a JDK 21+ (JAVA_HOME if
# it is one, else the newest under /usr/lib/jvm), installing Debian's OpenJDK when running as root
# and there is none. Exits with a one-line message when no JDK can be found.
java_major() { # the major version of java binary $1, or 0
  local v
  v=$("$1" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p' | head -1)
  [[ "$v" =~ ^[0-9]+$ ]] && echo "$v" || echo 0
}
jdk_release_major() { # the major version of the JDK at $1 from its release file (no JVM started), or 0
  local v
  v=$(sed -n 's/^JAVA_VERSION="\([0-9]*\).*/\1/p' "$1/release" 2>/dev/null || true)
  [[ "$v" =~ ^[0-9]+$ ]] && echo "$v" || echo 0
}
find_java_home() {
  if [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/javac" && $(java_major "$JAVA_HOME/bin/java") -ge 21 ]]; then
    echo "$JAVA_HOME"; return 0
  fi
  local best="" best_v=0 d v
  for d in /usr/lib/jvm/*/; do
    d="${d%/}"
    [[ -x "$d/bin/java" && -x "$d/bin/javac" ]] || continue
    v=$(java_major "$d/bin/java")
    if [[ $v -ge 21 && $v -gt $best_v ]]; then best="$d"; best_v=$v; fi
  done
  [[ -n "$best" ]] && { echo "$best"; return 0; }
  return 1
}
if ! GRANARY_JH=$(find_java_home); then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "granary: no JDK 21+ found; installing one with apt-get" >&2
    apt-get update -qq >/dev/null 2>&1 || true
    for p in openjdk-25-jdk-headless openjdk-21-jdk-headless; do
      if apt-cache show "$p" >/dev/null 2>&1; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$p" >/dev/null && break
      fi
    done
  fi
  GRANARY_JH=$(find_java_home) || {
    echo "granary: needs a JDK 21 or newer (none in JAVA_HOME or /usr/lib/jvm): install one, e.g. 'apt-get install openjdk-21-jdk-headless' or Temurin 25, and set JAVA_HOME" >&2
    exit 1
  }
fi
export JAVA_HOME="$GRANARY_JH"
