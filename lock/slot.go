package lock

import "strings"

// slotOf returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of its
// hash tag, or of the whole key when it has none, modulo 16384, as Redis and
// go-redis compute it. The batch operations group keys by it.
func slotOf(key string) uint16 {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 {
			key = key[open+1 : open+1+n]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^key[i]]
	}
	return crc % 16384
}

// crc16Table is the CRC16-CCITT table for the polynomial 0x1021.
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
