"""The text the desktop's active terminal shows, OSWorld's ``vm_terminal_output``.

OSWorld reads it over AT-SPI: the text of the focused terminal of GNOME Terminal's active window
(VTE's accessible text, the visible screen), with trailing whitespace cut, or nothing when no
terminal window is active. The desktops' terminal here is xterm, which has no AT-SPI; its own
equivalent is its ``print-immediate`` action, which writes the text of the screen, without
attributes, to a file. The agent loads ``RESOURCES`` into the X server at start, binding the
action to ``PRINT_KEYS`` in every xterm; ``READ_SCRIPT``, run on the desktop, presses them when
the active window is an xterm and prints the file; it exits ``NO_TERMINAL`` when no xterm is
active.
"""

PRINT_KEYS = "ctrl+shift+alt+F12"
FOLDER = "/tmp/.tandem-terminal"
RESOURCES = f"""\
XTerm*printFileImmediate: {FOLDER}/screen
XTerm*printModeImmediate: 0
XTerm*VT100.translations: #override Ctrl Shift Alt <Key>F12: print-immediate()
"""
NO_TERMINAL = 3
PRINT_TIMEOUT_S = 5.0
READ_SCRIPT = f"""\
window=$(xdotool getactivewindow 2>/dev/null) || exit {NO_TERMINAL}
case $(xprop -id "$window" WM_CLASS 2>/dev/null) in
  *'"XTerm"'*) ;;
  *) exit {NO_TERMINAL} ;;
esac
rm -rf {FOLDER} && mkdir -p {FOLDER} || exit 1
xdotool key --clearmodifiers {PRINT_KEYS}
for _ in $(seq {int(PRINT_TIMEOUT_S * 10)}); do
  for file in {FOLDER}/screen*; do
    [ -f "$file" ] && sleep 0.1 && exec cat "$file"
  done
  sleep 0.1
done
echo "xterm wrote no screen text in {PRINT_TIMEOUT_S:g}s" >&2
exit 1
"""
