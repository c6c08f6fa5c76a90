/* Content-defined chunking for PIM-CACHE (beyond the paper, which cuts fixed 1 KiB blocks,
 * Sec. 4.2): a gear rolling hash with FastCDC's normalized chunking (Xia et al., "FastCDC:
 * a Fast and Efficient Content-Defined Chunking Approach for Data Deduplication", USENIX
 * ATC 2016). Cut points depend only on the last 64 bytes, so an insertion or deletion
 * moves the cuts near it and leaves the chunks after the next cut unchanged: shifted
 * content deduplicates, where fixed offsets find nothing (docs/pim-cache.md, genomes). */
#include "internal.h"

/* 256 random 64-bit values (splitmix64 from seed 0x5eedc0de2025), fixed so that chunk
 * boundaries, and therefore fingerprints, are the same in every process. */
static const uint64_t gear[256] = {
    0xe169e09d919b01f7ull, 0x21d2871dc04c0a4full, 0xe7fd3628cdf287d5ull, 0x00a4422d19a47d85ull,
    0x0f0362c5efb96898ull, 0x289f2c9c61439151ull, 0x868735bddc035bbaull, 0x1f96e83c0577abb2ull,
    0x7aa0f1e0b546f3ddull, 0xecccedd63685e46full, 0x621a9788993ff75bull, 0x76e3e13653323268ull,
    0xfaf059d9088883ebull, 0xd9bb6b5fcae00f37ull, 0x3c2eb2d64346f77bull, 0x3fb80bb542c4564eull,
    0xf6f323d2e6759222ull, 0x4fb476a733677617ull, 0xec82213994ce1a82ull, 0x4be99a260e7c256eull,
    0xa223c8b76d773ce7ull, 0xf1ec2c8917cbba7bull, 0x7995de07f111afe6ull, 0xb6ae883521df1fb0ull,
    0x9f307fee1d0e91efull, 0x51f91221e1650cd0ull, 0xcbabfdc58c1604cfull, 0x8ca1f644f822df0full,
    0xc5e346d12d6e42faull, 0x0a16b2071adcfb06ull, 0xdfd139f6608856d6ull, 0xbbdc5078da40cc3dull,
    0xc85b98ab6778f410ull, 0x310a71de20cd9182ull, 0x4d19effb9a0c962full, 0x73d2451797dbb5a6ull,
    0xd876a22d2b485789ull, 0xdb2fc91cfb0347b5ull, 0xa50018fc81063852ull, 0xc458f0e8681bc204ull,
    0xe0dfd7a3042a7cb6ull, 0x907b5684538db006ull, 0x50511b9ba31ded39ull, 0xbb8793e9d1b7973eull,
    0xc0c348bc16a86be6ull, 0xb63c119aa6ac0288ull, 0xc3579d17052f32a9ull, 0x903a006e484441c6ull,
    0xad471841583ba60aull, 0xec02b811c2791376ull, 0xc9c14629f7925524ull, 0xb0b63f108244f05full,
    0xa7b6e23dd7338a87ull, 0xacbe3aeeb43d282dull, 0xfc3d35425b717782ull, 0x5ca779e160db2aa1ull,
    0xc1081e3365f8c32cull, 0x4eabf0b784c24cc3ull, 0xeb93ab382300cbf0ull, 0x38609171363bbeacull,
    0x16768664159ee5d5ull, 0xc3ac78b83e5f4dffull, 0x20ac255568495325ull, 0xc0c231e95e24ced2ull,
    0x85a4522d3051bd67ull, 0xd77e91d294ceecebull, 0x61736a9c0deef82aull, 0xdc9a33bfd918f9d3ull,
    0x9374798adef51594ull, 0xe95b26d2cc77baa5ull, 0x158151de9e343a27ull, 0x6168cf0b21de2aeeull,
    0x9fbf3b8a37400677ull, 0x296db471db4daae7ull, 0x60089eba96b7c592ull, 0x06ec40dbe8e9c48dull,
    0xab1ff18fe6ab7296ull, 0x8cc1366195fda451ull, 0x2bc00fab9151c96full, 0x13873191a620af14ull,
    0xf16e486e389d4049ull, 0x4bc7a4c7fcc1cfc2ull, 0x0e8ef164f1adf10eull, 0x338eb6fe9b5ed367ull,
    0x2b21ee910424daafull, 0xde781e57599480c4ull, 0x14982fce41f140b2ull, 0xdd32cc88afacf902ull,
    0x77ba681dc15f9893ull, 0xd0f0ec169148f882ull, 0x16bac7e217b9bf61ull, 0xccbc409588727fb6ull,
    0x197cded1a2ae7952ull, 0xd58f06c170c56463ull, 0x0d209b4bdf4fd93dull, 0xb7544543cbd0273aull,
    0x7e6f9503811705a4ull, 0x54820a36a0bf8eecull, 0x4988a140a7983139ull, 0xae1f6a3e5a10fe8aull,
    0x50c946cd23f11c23ull, 0x696ff42e703fdbf4ull, 0xbcde66b9a3ce0654ull, 0xdc292d76f40fd0bcull,
    0xb25bb70ec033af60ull, 0x9afbd364b86be4bdull, 0x85bb560c1ed133dbull, 0x6790e9043311054bull,
    0x93708f4f8dbaa225ull, 0xe2fa6237722388f9ull, 0x8fb71c94ceddcb7cull, 0x2a2f287dc0b87975ull,
    0xb51c72102511c3feull, 0x3936094559ee1ec9ull, 0x679934d1360a9b77ull, 0xb2b77cc6836f0fa7ull,
    0x628c3bc265f01661ull, 0xf8bb1681f422e6dfull, 0x5da7e2c9711515b9ull, 0x2608a4f47f925b30ull,
    0x89d7f2c9705beab8ull, 0xdebc5d23f8419d30ull, 0x904d92f1bdd0168cull, 0xb79e8254cef46bb9ull,
    0xb72cd22b7c1c7c10ull, 0x7df1c899639f1100ull, 0x2b09062b4fafb921ull, 0x7533020fd951a9aeull,
    0x74fd5123e446ec45ull, 0x82523a9f9f138a6aull, 0xb41e6dd07cc4c7e6ull, 0x3c005623a6bbc9dcull,
    0x40afcceb3b9cf673ull, 0x2745da24308f2eaaull, 0x4155fed5a1f1e23eull, 0x1e324772afff2913ull,
    0xdc6820d1a787069dull, 0x87baf058dab09b5cull, 0x814792824824f0d7ull, 0x50ba39022022498eull,
    0xfff818279a9accd6ull, 0xf573f80748d6a44dull, 0xc0a01a08280c86f0ull, 0x57601e619dd9984cull,
    0x02a15c8b5b4f3a25ull, 0x37aab5d445ce9d4dull, 0xb0b4c23f8af6f22dull, 0x28f48e2fe5b24113ull,
    0x5e256acb088686a2ull, 0xe67750e9ed7cc6d8ull, 0x4fddf8e10a48489dull, 0x451223ca3a1263ccull,
    0x4ce2cd3866d7ad47ull, 0xc7ef68efe8e17677ull, 0x9a6d96804ca228e9ull, 0xbe9e9ec5a6354a3bull,
    0x1e20693ece5a8603ull, 0x7d2c8c08aa8ab775ull, 0x366f958e3b48afadull, 0x05def0467e42a4cdull,
    0xbefd86983c913bf0ull, 0x95d6a0323a89812bull, 0xbdf9bbe39e0a151eull, 0x680e2c2bf0c358baull,
    0x07f6a55224902505ull, 0x0d38e75fc31145dcull, 0xb16eefd919d08221ull, 0x71395ce2423cb905ull,
    0x56e5b7c1823def3full, 0xaf023bdfd4e6e6f0ull, 0x4ff61e2121e40e31ull, 0x529d47823b99cd1dull,
    0x7508ec06bb1e915eull, 0x08d6af4cc7c69bf3ull, 0x84105a29e345f97eull, 0xa1810502d161e2ccull,
    0xdfcbd20fdffce134ull, 0xf10f1845c0c9a2dbull, 0xd01b2bc16068cdbaull, 0xfcdf5cb2369c11f8ull,
    0x7d1314be9f785d7aull, 0xd5ab3ca0227e7905ull, 0x180c79f99b36c81full, 0xe3f9e34b78dc9bceull,
    0x2f239b00fac87719ull, 0x416b4178ba0b4bb3ull, 0x144c58822e35d3a3ull, 0x2c2827167b30d3f0ull,
    0xaee7c1a39d42cf48ull, 0xfa90e0a1cf649035ull, 0x522851bc79193d2aull, 0xfd95ff6d2d089827ull,
    0xe3a471642464744cull, 0x278bf91f1823e568ull, 0x4922703bf7e0a63eull, 0xe4c2c6b75c2ed273ull,
    0xf6115ddbdb48d3f3ull, 0x3efeead0ce64c46full, 0xb0e7b073646d9bdbull, 0xc05c35e53f7eb236ull,
    0x640b6439c1b2f64full, 0xb357b8ff28cf5900ull, 0x2135934c454ce51eull, 0x8e67611479c1e2fdull,
    0x34372758bed8a588ull, 0xa5c6d21519930d38ull, 0x91ad25e8313b23c2ull, 0x4d357f3cd4798f75ull,
    0x6ce393713ee9a4b8ull, 0xd81de98544155d1aull, 0x83af08f4decb9037ull, 0x1fced81147ca522dull,
    0x147c6523da40e8beull, 0x6ba49932ef55b230ull, 0xc11f6dbec1c2203bull, 0xb6e2e131d2f92e66ull,
    0x030c7406dbe3b0fbull, 0xf4dc3f80887ed327ull, 0x8dfc8b6474d8d426ull, 0xb78f84f8239a49c1ull,
    0xc1fac4023d05b953ull, 0xcddac5c8d3097bdcull, 0x397ca5e83193672dull, 0xf8b941c3d65f6ef7ull,
    0x4015c70866e20a19ull, 0x541407f3bf229d80ull, 0xf6e1fea916baa0f8ull, 0x184bd0cfb4a150a1ull,
    0x2c588a154534abfaull, 0x3320d57b8e7274d7ull, 0x15889579f90c6cbeull, 0x3f59b42befaf1cc5ull,
    0xfbbd4032545e4adbull, 0x3d613d6c78e427fbull, 0x851266cad2d09f54ull, 0xa2a221421aacea33ull,
    0x6ba2d0888767fe20ull, 0x52d1286459880acaull, 0xf44980edfab3d297ull, 0x4e0f4fd01e44a846ull,
    0x79e4ef02947929b7ull, 0xf348bcec9ed29307ull, 0x23119cbadd6ce176ull, 0x27243cea0becec40ull,
    0xaa6c69f180bc0030ull, 0x62c8b982a19db4b0ull, 0x2f531516613df826ull, 0x2120cdfb5d6a6581ull,
    0x14de698171d263abull, 0x203d6b5ec5c83197ull, 0x6b756d61a7313dd4ull, 0x9afe7cd7474c4887ull,
    0x8639c9153ef3ceabull, 0xf497a9ba519790b4ull, 0xcea286dffea5941eull, 0x6db9bc2176d1b4e5ull,
};

/* The gear hash shifts left, so bit 63 - j depends on the last 64 - j bytes: the masks
 * take the top bits (the paper's masks spread bits over the top 48 for the same reason). */
static uint64_t top_bits(unsigned n) { return n == 0 ? 0 : n >= 64 ? ~0ull : ~0ull << (64 - n); }

void cdc_init(cdc_params *p, uint32_t min, uint32_t avg, uint32_t max)
{
    p->min = min;
    p->avg = avg;
    p->max = max;
    unsigned bits = nm_log2_floor(avg);
    /* normalization level 2 (FastCDC Sec. 3.3): two bits harder before avg, two easier after */
    p->mask_s = top_bits(bits + 2);
    p->mask_l = top_bits(bits > 2 ? bits - 2 : 1);
}

size_t cdc_cut(const cdc_params *p, const uint8_t *buf, size_t n)
{
    if (n <= p->min) return n;
    if (n > p->max) n = p->max;
    size_t norm = p->avg < n ? p->avg : n, i = p->min;
    uint64_t fp = 0;
    /* the hash needs no warm-up: bytes before `min` would only be shifted out again */
    for (; i < norm; i++) {
        fp = (fp << 1) + gear[buf[i]];
        if (!(fp & p->mask_s)) return i + 1;
    }
    for (; i < n; i++) {
        fp = (fp << 1) + gear[buf[i]];
        if (!(fp & p->mask_l)) return i + 1;
    }
    return n;
}
