#!/usr/bin/env bash
# AddressSanitizer and UBSan over every CPU test program (or those named); see
# sanitizer_check.sh.
exec "$(dirname "$0")/sanitizer_check.sh" address "$@"
