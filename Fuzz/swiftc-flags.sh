# The swiftc flags every fuzz target is built with, sourced by run.sh, imap.sh and mime.sh (after they set `out`):
# one list, so that a flag the sources need (such as -package-name for `package` declarations) cannot be missing
# from one script. Each script adds its -sanitize and modules.
swift_flags=(-O -wmo -parse-as-library -swift-version 6 -package-name coffer -module-cache-path "$out/module-cache")
