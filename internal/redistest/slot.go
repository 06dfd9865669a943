package redistest

import "strings"

// SlotCount is the number of hash slots in a Redis Cluster.
const SlotCount = 16384

// Slot returns the Redis Cluster hash slot of key: the CRC16 (CCITT, XMODEM variant) of the
// key modulo 16384. When the key holds a hash tag, a non-empty run of bytes between the first
// '{' and the first '}' after it, only the tag is hashed, so keys that share a tag share a
// slot. Slot lets tests check which keys land together without asking a server.
func Slot(key string) int {
	return int(crc16(hashTag(key)) % SlotCount)
}

// hashTag returns the part of key that Redis hashes: the first non-empty {tag}, or the whole
// key when there is none. "foo{}{bar}" has an empty first tag and so hashes whole.
func hashTag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return key
	}
	n := strings.IndexByte(key[open+1:], '}')
	if n <= 0 {
		return key
	}
	return key[open+1 : open+1+n]
}

// crc16Table is the CRC16-CCITT table for polynomial 0x1021, computed once at init.
var crc16Table = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

// crc16 is CRC16-CCITT with a zero initial value and no final xor (the XMODEM variant), the
// checksum Redis Cluster uses for key slots.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^s[i]]
	}
	return crc
}
