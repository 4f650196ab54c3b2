#!/bin/zsh -f
# notewell's per-keystroke client for Alfred, in zsh. What it does and why is told below
# the hand-over: zsh parses a sourced file as it runs it, so the lines the Alfred
# workflow's copy runs before handing over to the daemon's client come first, bare.
\builtin emulate -R zsh
\builtin unalias -m '*' 2>/dev/null

# The home notewell.wire.paths.home() names, in REPLY; 1 where only Python can tell (a
# ~user home, no $HOME, a relative XDG_DATA_HOME).
_notewell_home() {
  emulate -L zsh
  setopt extended_glob
  local home user=$HOME
  if [[ -n $NOTEWELL_HOME ]]; then
    home=$NOTEWELL_HOME
    if [[ $home == '~' || $home == '~/'* ]]; then
      [[ -n $user ]] || return 1
      home=$user${home#\~}
    fi
    [[ $home == '~'* ]] && return 1
    REPLY=${home:a}
  else
    [[ -n $user ]] || return 1
    if [[ $OSTYPE == darwin* ]]; then
      REPLY=${user%%/#}/Library/Application\ Support/notewell
    else
      local data=${XDG_DATA_HOME:-${user%%/#}/.local/share}
      REPLY=${data%%/#}/notewell
    fi
  fi
  [[ $REPLY == /* ]]
}

if [[ -z $_notewell_workflow && ! -f ${${(%):-%x}:h}/notewell-query ]]; then
  typeset -g _notewell_workflow=1
  if _notewell_home && [[ -r $REPLY/notewell-client ]]; then
    REPLY=$(<$REPLY/notewell-client)
    if [[ $REPLY == /* && -f $REPLY && -r $REPLY ]]; then
      source $REPLY "$@"
      return
    fi
  fi
fi

# The fast path of notewell-query.
#
# Usage: notewell-query.zsh QUERY...     (or, from Alfred's /bin/zsh: source it with "$1")
#        notewell-query.zsh --alfred-action ACTION ARG     (the workflow's Run Script objects)
#        notewell-query.zsh --alfred-related TEXT_OR_FILE  (its related notes Script Filter)
#
# Python's own start is 7–8 ms before a line of the client runs; zsh's is under 2 ms, and
# every Mac has it. This script asks the daemon for the one thing a keystroke needs, a search
# in Alfred's format, over the same socket and protocol as notewell/client.py (a 4-byte
# big-endian length, then msgpack), and prints the JSON the daemon prepared. Anything else
# (no daemon, an error reply, a version mismatch, a socket path it would need Python to
# work out, zsh without its socket module) it hands to the Python client, which says what
# happened as an Alfred item: this script never prints an error itself.
#
# It ships inside the notewell package (notewell/launcher/scripts/), beside its Python
# fallback, and the Alfred workflow carries a copy of it (no Python path is baked into the
# workflow, so a Python upgrade that moves the package changes nothing). It carries the
# version of the package it came from: every request says which notewell asks, so a
# daemon of another version notices (one older than its installation restarts itself into
# it; the Python client shows that) instead of answering the wrong way.
#
# The first lines. Alfred sources this into a /bin/zsh that has read ~/.zshenv: it is
# parsed with zsh's own options and no aliases (an option like ignore_braces would break
# `{fd}`); the shell is Alfred's and ends with this script, so nothing of the user's is
# lost. Then the hand-over: Alfred's workflow runs its own copy of this file (the only
# copy with no Python client beside it), which may be older than the installation, so it
# hands everything (a query, an --alfred-action) to the client the daemon recorded
# (notewell-client in the home, written by notewell.wire.paths.record_client when the
# daemon starts: the zsh client of the daemon's own package). The client then always
# speaks the running daemon's version, and an upgrade of notewell needs no new workflow.
# The record is read without a fork, and the rest of this copy is never parsed. No record,
# or one naming a file that is gone (its installation was removed before the new daemon
# started): this copy carries on by itself. _notewell_workflow tells the recorded client
# (and this copy) that the hand-over is done and that Python is the installation the home
# records; it and the arguments are what every later client must accept.
#
# The socket: the daemon writes the path it listens on to notewell-socket in its home
# (notewell.wire.paths.record_socket; a short path under /tmp when the home is too deep for
# a socket address, which zsh could not work out without Python's hash). Its folders must
# be this user's alone (checked in notewell_query), or Python takes over and says why.
#
# The fallback: run on its own, the package's copy runs its Python client (NOTEWELL_PYTHON
# and NOTEWELL_CLIENT, default: the checkout's .venv, else the virtualenv this package is
# installed in, else python3; and ./notewell-query beside this file). Run by the workflow
# (its copy, or the recorded client it handed over to), it runs the notewell recorded in
# the home (notewell-command, written by `notewell serve`, `agent install` and `alfred
# build`) as `notewell alfred query QUERY`, through notewell-run.zsh beside this file.
# Environment: NOTEWELL_HOME (as everywhere). tests/test_client_zsh.py checks it against the
# Python client byte for byte.

typeset -g _notewell_here=${${(%):-%x}:A:h}
# notewell.__version__ of the package this file ships in (tests/test_client_zsh.py checks).
typeset -g _notewell_version=0.1.0

_notewell_fallback() {
  [[ -n $fd ]] && exec {fd}>&-  # notewell_query's connection, if it opened one
  if [[ -z $_notewell_workflow ]]; then
    # NOTEWELL_PYTHON, else a checkout's .venv (scripts/launcher/notewell/daemon/..), else
    # the virtualenv whose lib/pythonX.Y/site-packages holds this package, else python3.
    local python=${NOTEWELL_PYTHON:-$_notewell_here/../../../../.venv/bin/python}
    [[ -x $python ]] || python=${_notewell_here:h:h:h:h:h:h}/bin/python
    [[ -x $python ]] || python=python3
    exec $python -IS ${NOTEWELL_CLIENT:-$_notewell_here/notewell-query} "$@"
  fi
  _notewell_run query "$@"  # the workflow's copy
}

# The socket the daemon of this home listens on, as it recorded it (read without a fork).
_notewell_socket() {
  _notewell_home || return 1
  local record=$REPLY/notewell-socket
  [[ -r $record ]] || return 1
  REPLY=$(<$record)
  [[ $REPLY == /* ]]
}

# The workflow's copy falls back to, and its actions run, the installation the home
# records: notewell-run.zsh beside this file, read only then (a keystroke parses none of it).
_notewell_run() {
  source $_notewell_here/notewell-run.zsh "$@"
}

# A msgpack str header for a string of $1 bytes.
_notewell_str() {
  local n=$1
  if (( n < 32 )); then
    REPLY=${(#)$(( 0xa0 | n ))}
  elif (( n < 256 )); then
    REPLY=$'\xd9'${(#)n}
  else
    REPLY=$'\xda'${(#)$(( n >> 8 ))}${(#)$(( n & 255 ))}
  fi
}

# Read exactly $2 bytes from fd $1 into REPLY, waiting at most 2 s for each read.
_notewell_read() {
  local fd=$1 want=$2 chunk
  REPLY=
  while (( ${#REPLY} < want )); do
    sysread -i $fd -s $(( want - ${#REPLY} > 65536 ? 65536 : want - ${#REPLY} )) -t 2 chunk \
      || return 1
    REPLY+=$chunk
  done
}

# The big-endian number in the bytes of $1.
_notewell_number() {
  local bytes=$1 c
  REPLY=0
  for c in ${(s::)bytes}; do (( REPLY = REPLY << 8 | #c )); done
}

notewell_query() {
  emulate -L zsh
  setopt no_multibyte extended_glob  # lengths in bytes, as the protocol counts them
  local fd=  # the connection, once open: _notewell_fallback closes it
  # A daemon that closes before reading (busy, stopping) must mean a fallback, not a
  # shell killed by SIGPIPE with nothing printed.
  trap '' PIPE
  zmodload zsh/net/socket zsh/system 2>/dev/null || _notewell_fallback "$@"
  local query=${(j: :)@}
  # A paste too long for one request: the Python client trims it first.
  (( ${#query} < 60000 )) || _notewell_fallback "$@"
  _notewell_socket || _notewell_fallback "$@"
  local sock=$REPLY
  # Its folder, and a deep home's folder above it (/tmp/notewell-UID[-N]/HASH, where anyone
  # may make a folder first), each a real folder (not a link) of this user's with mode
  # 0700, as notewell.wire.paths.socket_chain. zsh cannot ask the kernel who answers on a
  # socket, so anything else goes to Python, which checks that too and says what is wrong.
  local folder=${sock:h}
  local -a mine
  while :; do
    mine=( $folder(#qN/Uf700) )
    (( ${#mine} )) || _notewell_fallback "$@"
    [[ $folder == /tmp/notewell-*/* ]] || break
    folder=${folder:h}
  done
  zsocket $sock 2>/dev/null || _notewell_fallback "$@"
  fd=$REPLY
  local header
  # {"op": "search", "v": 1, "notewell": VERSION, "query": QUERY, "format": "alfred"}, as
  # client.search_request builds it
  _notewell_str ${#_notewell_version}
  local body=$'\x85\xa2op\xa6search\xa1v\x01\xa8notewell'$REPLY$_notewell_version
  _notewell_str ${#query}
  body+=$'\xa5query'$REPLY$query$'\xa6format\xa6alfred'
  local n=${#body}
  header=${(#)$(( n >> 24 & 255 ))}${(#)$(( n >> 16 & 255 ))}${(#)$(( n >> 8 & 255 ))}
  header+=${(#)$(( n & 255 ))}
  syswrite -o $fd -- $header$body 2>/dev/null || _notewell_fallback "$@"
  _notewell_read $fd 4 && _notewell_number $REPLY || _notewell_fallback "$@"
  n=$REPLY
  # An ok reply is {"ok": true, "result": {"alfred": JSON}}; anything else goes to Python.
  # The JSON is read straight into its own variable: no copy of a 60 KB reply is made.
  local ok=$'\x82\xa2ok\xc3\xa6result\x81\xa6alfred' t extra size
  (( n > ${#ok} && n <= 16777216 )) && _notewell_read $fd $(( ${#ok} + 1 )) \
    && [[ ${REPLY[1,-2]} == $ok ]] || _notewell_fallback "$@"
  t=$REPLY[-1]
  case $(( #t )) in
    (<160-191>) (( size = #t & 31, extra = 0 )) ;;
    (217) extra=1 ;;
    (218) extra=2 ;;
    (219) extra=4 ;;
    (*) _notewell_fallback "$@" ;;
  esac
  if (( extra )); then
    _notewell_read $fd $extra && _notewell_number $REPLY || _notewell_fallback "$@"
    size=$REPLY
  fi
  (( size == n - ${#ok} - 1 - extra )) && _notewell_read $fd $size \
    || _notewell_fallback "$@"
  exec {fd}>&-
  fd=
  print -rn -- $REPLY
}

if (( $# > 1 )) && [[ $1 == --alfred-action ]]; then
  shift
  _notewell_run action "$@"
fi
# Related notes (the workflow's Universal Action and Hotkey): not a keystroke's search,
# so always the installation's `notewell alfred related TEXT_OR_FILE`.
if [[ $1 == --alfred-related ]]; then
  shift
  _notewell_run related "$@"
fi
notewell_query "$@"
