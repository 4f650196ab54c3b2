# notewell's Alfred workflow, when it needs Python: run `notewell alfred $1 ARGS...` with the
# notewell recorded in the home.
#
# Sourced by notewell-query.zsh (which defines _notewell_home) as
#   source notewell-run.zsh query QUERY            (the fallback of the workflow's copy)
#   source notewell-run.zsh action ACTION ARG      (its Run Script objects, through
#                                                   notewell-query.zsh --alfred-action)
#   source notewell-run.zsh related TEXT_OR_FILE   (its related notes Script Filter)
# The home's notewell-command (a JSON list, written by `notewell serve`, `agent install` and
# `alfred build`) names the installation, so no Python path is baked into the workflow and a
# Python upgrade that moves the package changes nothing. The command is run, not exec'd: if
# that notewell no longer runs (its Python was removed), this says what to do instead of
# leaving Alfred blank (Alfred JSON for a query, a line for the debugger otherwise). Kept
# apart from notewell-query.zsh so that a keystroke parses none of it.

# The UTF-8 bytes of code point $1 (no_multibyte: one byte per ${(#)...}).
_notewell_utf8() {
  local -i u=$1
  if (( u < 0x80 )); then
    REPLY=${(#)u}
  elif (( u < 0x800 )); then
    REPLY=${(#)$(( 0xC0 | u >> 6 ))}${(#)$(( 0x80 | u & 0x3F ))}
  elif (( u < 0x10000 )); then
    REPLY=${(#)$(( 0xE0 | u >> 12 ))}${(#)$(( 0x80 | u >> 6 & 0x3F ))}
    REPLY+=${(#)$(( 0x80 | u & 0x3F ))}
  else
    REPLY=${(#)$(( 0xF0 | u >> 18 ))}${(#)$(( 0x80 | u >> 12 & 0x3F ))}
    REPLY+=${(#)$(( 0x80 | u >> 6 & 0x3F ))}${(#)$(( 0x80 | u & 0x3F ))}
  fi
}

# The command recorded in file $1 (a JSON list of strings, as json.dumps writes it) in the
# array reply; 1 if there is none or it cannot be read.
_notewell_command() {
  emulate -L zsh
  setopt no_multibyte extended_glob
  [[ -r $1 ]] || return 1
  local text=$(<$1) s chunk c
  local -i u lo
  reply=()
  [[ $text == [[:space:]]#\[* ]] || return 1
  text=${text#[[:space:]]#\[}
  while [[ $text == [[:space:]]#\"* ]]; do
    text=${text#[[:space:]]#\"}
    s=
    while :; do
      chunk=${text%%[\\\"]*}  # up to the next backslash or quote
      s+=$chunk
      text=$text[$(( ${#chunk} + 1 )),-1]
      [[ $text == \\* ]] || break
      c=$text[2]
      text=$text[3,-1]
      case $c in
        (n) s+=$'\n' ;;
        (t) s+=$'\t' ;;
        (r) s+=$'\r' ;;
        (b) s+=$'\b' ;;
        (f) s+=$'\f' ;;
        (u)
          [[ $text == [[:xdigit:]](#c4)* ]] || return 1
          u=16#$text[1,4]
          text=$text[5,-1]
          if (( u >= 0xD800 && u < 0xDC00 )) && [[ $text == \\u[[:xdigit:]](#c4)* ]]; then
            lo=16#$text[3,6]
            text=$text[7,-1]
            (( u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00) ))
          fi
          _notewell_utf8 $u
          s+=$REPLY ;;
        (*) s+=$c ;;  # \" \\ \/
      esac
    done
    [[ $text == \"* ]] || return 1
    text=${text#\"}
    reply+=("$s")
    text=${text#[[:space:]]#,}
  done
  [[ $text == [[:space:]]#\][[:space:]]# ]] && (( ${#reply} ))
}

local what=$1
shift
local title="notewell: the installation this workflow runs is missing"
local subtitle='Run `notewell agent install` in a terminal (reinstall notewell first if its Python was removed)'
if _notewell_home && _notewell_command $REPLY/notewell-command; then
  "${reply[@]}" alfred $what "$@" && exit 0
  # 126 and 127: it is not there or cannot run (its Python removed); else it ran and failed.
  local -i code=$?
  if (( code != 126 && code != 127 )); then
    title="notewell: the installation this workflow runs failed"
    subtitle='Run `notewell doctor` in a terminal: it says what is wrong and what to do'
  fi
fi
if [[ $what == (query|related) ]]; then
  # Alfred JSON as notewell.wire.messages.message_feedback(*INSTALLATION_MISSING) (or
  # INSTALLATION_FAILED) writes it (tests/test_client_zsh.py holds them equal): no Python
  # runs to write it here.
  print -rn -- '{"skipknowledge":true,"items":[{"title":"'$title'","subtitle":"'$subtitle'","valid":false,"icon":{"path":"icon.png"}}]}'
else
  print -ru2 -- "$title: $subtitle"
fi
exit 0
