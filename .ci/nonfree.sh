# Sourced by the CI scripts that need Debian's non-free component
# (.ci/vendor-libs.sh, .ci/libs-smi.sh): enable_nonfree adds it by copying
# this machine's Debian entries (deb822 or one-line format) with only the
# component changed, never naming a mirror; it needs log() defined. The
# caller runs apt-get update.
enable_nonfree() {
	local nonfree=/etc/apt/sources.list.d/gpumem-non-free.sources
	local nonfree_list=/etc/apt/sources.list.d/gpumem-non-free.list
	if [ -e "$nonfree" ] || [ -e "$nonfree_list" ]; then
		return 0
	fi
	if [ -f /etc/apt/sources.list.d/debian.sources ]; then
		log "adding non-free from /etc/apt/sources.list.d/debian.sources"
		sed -E 's/^Components:.*/Components: non-free/' /etc/apt/sources.list.d/debian.sources >"$nonfree"
	elif [ -f /etc/apt/sources.list ] && grep -qE '^deb ' /etc/apt/sources.list; then
		log "adding non-free from /etc/apt/sources.list"
		# keep "deb [opts] URI SUITE", replace the components with non-free
		grep -E '^deb ' /etc/apt/sources.list |
			sed -E 's/^(deb( \[[^]]*\])? [^ ]+ [^ ]+).*/\1 non-free/' >"$nonfree_list"
	else
		log "no Debian source entries found to copy"
		return 1
	fi
}
