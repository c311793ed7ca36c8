package rtc

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// cache holds compiled images by key: in memory always, on disk when dir is
// set. Its methods are safe for concurrent use.
type cache struct {
	dir string

	mu    sync.Mutex
	mem   map[[32]byte]*Result
	stats CacheStats
}

// CacheStats counts a Compiler's cache lookups.
type CacheStats struct {
	MemoryHits int // served from memory
	DiskHits   int // served from the cache directory
	Misses     int // compiled
	DiskErrors int // cache files unreadable, corrupt or not written (each then compiled and rewritten)
}

func newCache(dir string) *cache {
	return &cache{dir: dir, mem: map[[32]byte]*Result{}}
}

// CacheStats returns the cache's counters.
func (c *Compiler) CacheStats() CacheStats {
	if c == nil {
		return CacheStats{}
	}
	c.cache.mu.Lock()
	defer c.cache.mu.Unlock()
	return c.cache.stats
}

// cacheKey hashes everything the image depends on; each field is length
// prefixed so that no two requests share a key.
func cacheKey(compiler, backend, target string, bin bool, opts, exprs []string, src string) [32]byte {
	h := sha256.New()
	field := func(s string) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	field("gpumem-rtc-1")
	field(compiler)
	field(backend)
	field(target)
	field(strconv.FormatBool(bin))
	field(strconv.Itoa(len(opts)))
	for _, o := range opts {
		field(o)
	}
	field(strconv.Itoa(len(exprs)))
	for _, e := range exprs {
		field(e)
	}
	field(src)
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// clone is a copy the caller may modify without touching the cache.
func clone(r *Result, cached bool) *Result {
	out := *r
	out.Image = append([]byte(nil), r.Image...)
	if r.Lowered != nil {
		out.Lowered = maps.Clone(r.Lowered)
	}
	out.Cached = cached
	return &out
}

func (c *cache) get(key [32]byte) (*Result, bool) {
	c.mu.Lock()
	if r, ok := c.mem[key]; ok {
		c.stats.MemoryHits++
		c.mu.Unlock()
		return clone(r, true), true
	}
	c.mu.Unlock()
	if c.dir != "" {
		r, err := c.readFile(key)
		c.mu.Lock()
		defer c.mu.Unlock()
		switch {
		case err == nil:
			c.stats.DiskHits++
			c.mem[key] = r
			return clone(r, true), true
		case !errors.Is(err, os.ErrNotExist):
			c.stats.DiskErrors++
		}
		c.stats.Misses++
		return nil, false
	}
	c.mu.Lock()
	c.stats.Misses++
	c.mu.Unlock()
	return nil, false
}

// put stores a compiled result; the caller's copy stays its own.
func (c *cache) put(key [32]byte, r *Result) {
	stored := clone(r, false)
	c.mu.Lock()
	c.mem[key] = stored
	c.mu.Unlock()
	if c.dir != "" {
		if err := c.writeFile(key, stored); err != nil {
			c.mu.Lock()
			c.stats.DiskErrors++
			c.mu.Unlock()
		}
	}
}

// diskEntry is a cache file: JSON with the image (base64) and its hash, so
// that a truncated or altered file is detected and ignored.
type diskEntry struct {
	Format   string            `json:"format"`
	Key      string            `json:"key"`
	Target   string            `json:"target"`
	Compiler string            `json:"compiler"`
	Log      string            `json:"log"`
	Lowered  map[string]string `json:"lowered,omitempty"`
	Image    []byte            `json:"image"`
	SHA256   string            `json:"sha256"`
}

const diskFormat = "gpumem-rtc-1"

func (c *cache) path(key [32]byte) string {
	return filepath.Join(c.dir, hex.EncodeToString(key[:])+".rtc")
}

// errCorrupt is a cache file that does not read back whole.
var errCorrupt = errors.New("rtc: corrupt cache file")

func (c *cache) readFile(key [32]byte) (*Result, error) {
	data, err := os.ReadFile(c.path(key))
	if err != nil {
		return nil, err
	}
	var e diskEntry
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, errCorrupt
	}
	sum := sha256.Sum256(e.Image)
	if e.Format != diskFormat || e.Key != hex.EncodeToString(key[:]) || e.SHA256 != hex.EncodeToString(sum[:]) || len(e.Image) == 0 {
		return nil, errCorrupt
	}
	return &Result{Image: e.Image, Log: e.Log, Lowered: e.Lowered, Target: e.Target, Compiler: e.Compiler}, nil
}

// writeFile writes the entry atomically: a temporary file in the same
// directory, renamed over the key's name.
func (c *cache) writeFile(key [32]byte, r *Result) error {
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return err
	}
	sum := sha256.Sum256(r.Image)
	data, err := json.Marshal(diskEntry{
		Format: diskFormat, Key: hex.EncodeToString(key[:]), Target: r.Target, Compiler: r.Compiler,
		Log: r.Log, Lowered: r.Lowered, Image: r.Image, SHA256: hex.EncodeToString(sum[:]),
	})
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(c.dir, ".tmp-*.rtc")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, c.path(key)); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
