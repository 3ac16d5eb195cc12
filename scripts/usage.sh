# Sourced first by every script here, before anything that needs a bucket or does work:
#
#   source "$(dirname "$0")/usage.sh"
#   if help_asked "$@"; then print_usage; exit 0; fi
#
# A script's usage is its header comment (the `#` lines after the `#!` line); `-h` or `--help`
# anywhere among its arguments asks for it. A script that is sourced itself (setup_env.sh) returns
# instead of exiting, so as not to end the shell that sourced it.

# help_asked ARGS...: whether -h or --help is one of ARGS.
help_asked() {
  local arg
  for arg in "$@"; do
    case "$arg" in -h|--help) return 0 ;; esac
  done
  return 1
}

# print_usage: the header comment of the script that sourced this file (this file's own, run alone).
print_usage() {
  local script="${BASH_SOURCE[1]:-${BASH_SOURCE[0]}}"
  awk 'NR == 1 && /^#!/ { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$script"
}

if [ "${BASH_SOURCE[0]}" = "$0" ] && help_asked "$@"; then print_usage; exit 0; fi
