"""Which items of an official release make up the project's development splits.

The VISTA human set, FineDialFact's HybriDialogue set and FHSumBench are released as one file each;
the project develops on a fixed part of each and keeps the rest back for independent measurement.
``vista-distill data fetch`` cuts these parts out of the official files (see :mod:`.fetch`), so
that a fresh data root reproduces them byte for byte. Generated from the development files; do not
edit by hand.
"""

from __future__ import annotations


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# sha256 of json.dumps(conversation, sort_keys=True, ensure_ascii=False, separators=(",", ":")),
# first 16 hex digits, in the order of vista_human/dev.json (the conversations carry no ids).
VISTA_HUMAN_DEV = _words("""
a0872f344e3f6dba 2103c6d1c7f28251 aaa066a9fb93fb6b bd82a4917208d255 e7c97566ea07a2c7 9575fd5027f3ef01
45b6f148b5fa2032 7d7b41e48898dbb0 0eb38997fe306b52 656bdc2875f365ef c2ed922418041422 9415840b833c51bd
784ba555884242f9 7388af577bf685d9 72365544d3fc6664 1e7cfe363ddb87db a3fad11e765ca85e b74dca36fba127ca
f8fc28158b162892 d1714a7daf9fa37b c15085bd02d112f0 49d78e3be804c473 ed23aab936b3179f 03a5f899aa53d30e
4dd9abfecb005248 ac6bb2fde18de28d 90b1fd2ae1aeeef7 36f2a967334bae09 237a3e512e23fbcb 30439768e7dd7eed
88c897c6046b7988 ea32701e07f68be5 9d7cd181370994ab 05af6749f8ba107e 0b4266cc4105ea7c
""")

# ``id`` of the atomic facts in finedialfact/hybridial_dev.json, in order.
FINEDIALFACT_DEV = _words("""
dialogue-100 dialogue-104 dialogue-105 dialogue-106 dialogue-107 dialogue-110 dialogue-111 dialogue-112
dialogue-115 dialogue-116 dialogue-117 dialogue-118 dialogue-120 dialogue-122 dialogue-124 dialogue-125
dialogue-127 dialogue-131 dialogue-132 dialogue-133 dialogue-134 dialogue-136 dialogue-137 dialogue-138
dialogue-141 dialogue-143 dialogue-145 dialogue-146 dialogue-147 dialogue-149 dialogue-150 dialogue-152
dialogue-153 dialogue-154 dialogue-156 dialogue-157 dialogue-158 dialogue-161 dialogue-163 dialogue-164
dialogue-166 dialogue-167 dialogue-169 dialogue-172 dialogue-173 dialogue-174 dialogue-175 dialogue-176
dialogue-177 dialogue-178 dialogue-180 dialogue-181 dialogue-183 dialogue-185 dialogue-186 dialogue-188
dialogue-189 dialogue-190 dialogue-191 dialogue-192 dialogue-196 dialogue-197 dialogue-198 dialogue-200
dialogue-201 dialogue-203 dialogue-204 dialogue-209 dialogue-212 dialogue-213 dialogue-215 dialogue-219
dialogue-220 dialogue-222 dialogue-223 dialogue-226 dialogue-227 dialogue-228 dialogue-229 dialogue-230
dialogue-231 dialogue-232 dialogue-233 dialogue-236 dialogue-237 dialogue-238 dialogue-240 dialogue-246
dialogue-248 dialogue-250 dialogue-253 dialogue-254 dialogue-255 dialogue-256 dialogue-257 dialogue-258
dialogue-259 dialogue-261 dialogue-266 dialogue-267 dialogue-269 dialogue-270 dialogue-271 dialogue-272
dialogue-274 dialogue-275 dialogue-277 dialogue-280 dialogue-281 dialogue-282 dialogue-283 dialogue-284
dialogue-286 dialogue-287 dialogue-289 dialogue-290 dialogue-291 dialogue-292 dialogue-293 dialogue-295
dialogue-300 dialogue-302 dialogue-303 dialogue-305 dialogue-309 dialogue-310 dialogue-311 dialogue-314
dialogue-316 dialogue-320 dialogue-321 dialogue-323 dialogue-324 dialogue-325 dialogue-326 dialogue-327
dialogue-328 dialogue-329 dialogue-331 dialogue-337 dialogue-339 dialogue-343 dialogue-346 dialogue-348
dialogue-351 dialogue-352 dialogue-353 dialogue-354 dialogue-355 dialogue-356 dialogue-357 dialogue-358
dialogue-359 dialogue-360 dialogue-361 dialogue-362 dialogue-363 dialogue-364 dialogue-366 dialogue-368
dialogue-369 dialogue-370 dialogue-371 dialogue-372 dialogue-373 dialogue-376 dialogue-377 dialogue-378
dialogue-380 dialogue-381 dialogue-382 dialogue-384 dialogue-385 dialogue-391 dialogue-392 dialogue-395
dialogue-396 dialogue-397 dialogue-398 dialogue-399 dialogue-400 dialogue-403 dialogue-404 dialogue-406
dialogue-409 dialogue-413 dialogue-414 dialogue-415 dialogue-417 dialogue-418 dialogue-419 dialogue-420
dialogue-421 dialogue-422 dialogue-423 dialogue-425 dialogue-427 dialogue-429 dialogue-431 dialogue-433
dialogue-435 dialogue-436 dialogue-440 dialogue-441 dialogue-443 dialogue-445 dialogue-446 dialogue-447
dialogue-450 dialogue-452 dialogue-453 dialogue-454 dialogue-455 dialogue-456 dialogue-458 dialogue-460
dialogue-461 dialogue-462 dialogue-466 dialogue-467 dialogue-468 dialogue-470 dialogue-471 dialogue-472
dialogue-474 dialogue-475 dialogue-476 dialogue-477 dialogue-478 dialogue-479 dialogue-480 dialogue-481
dialogue-483 dialogue-484 dialogue-485 dialogue-491 dialogue-493 dialogue-495 dialogue-497 dialogue-498
dialogue-499 dialogue-500 dialogue-501 dialogue-502 dialogue-503 dialogue-506 dialogue-509 dialogue-510
dialogue-511 dialogue-512 dialogue-513 dialogue-514 dialogue-515 dialogue-516 dialogue-519 dialogue-520
dialogue-521 dialogue-522 dialogue-525 dialogue-526 dialogue-527 dialogue-528 dialogue-529 dialogue-530
dialogue-532 dialogue-533 dialogue-540 dialogue-541 dialogue-542 dialogue-545 dialogue-546 dialogue-549
dialogue-550 dialogue-552 dialogue-556 dialogue-557 dialogue-558 dialogue-559 dialogue-560 dialogue-562
dialogue-563 dialogue-565 dialogue-569 dialogue-571 dialogue-574 dialogue-576 dialogue-577 dialogue-579
dialogue-580 dialogue-581 dialogue-582 dialogue-584 dialogue-585 dialogue-587 dialogue-589 dialogue-591
dialogue-592 dialogue-596 dialogue-597 dialogue-599
""")

# ``id`` of the rows in fhsumbench/dev.json, in order.
FHSUMBENCH_DEV = tuple(int(i) for i in _words("""
0 8 20 21 27 29 31 33 43 49 50 51 53 68 70 78 83 86 89 90 101 103 104 109 110 114 117 118 120 123 125
129 130 133 138 144 145 147 148 150 153 154 155 157 161 162 164 165 167 172 175 177 179 183 185 189 192
193 195 198 204 205 214 215 219 220 230 231 232 233 234 235 236 237 239 242 243 244 245 247 248 264 265
266 273 279 281 287 292 298 300 308 314 317 318 323 324 328 330 331 332 341 344 347 354 357 358 360 361
383 387 392 396 400 401 403 404 407 410 411 413 414 416 418 422 425 426 436 438 439 451 452 461 463 468
472 477 478 479 485 489 492 494 495 496 501 502 504 507 510 514 517 520 522 528 530 533 535 537 539 541
546 547 550 552 554 562 563 569 571 572 577 578 580 585 591 592 593 602 607 610 616 621 624 625 637 642
643 644 648 649 650 653 656 660 661 662 667 668 671 672 676 680 687 688 690 695 697 705 706 707 708 709
711 713 714 715 716 720 723 724 733 734 739 742 743 745 749 753 759 766 767 768 771 773 788 793 798 799
805 809 812 814 817 825 829 831 835 844 845 848 849 852 853 857 859 861 863 873 877 882 888 890 891 893
894 897 900 901 902 906 911 916 919 920 925 928 929 930 931 932 934 945 949 963 964 966 970 971 972 982
983 984 986 990 992 1001 1003 1006 1007 1008 1010 1022 1023 1028 1030 1031 1032 1034 1037 1039 1044 1049
1053 1054 1057 1059 1064 1065 1075 1079 1081 1090 1093 1095 1096 1097 1102 1107 1109 1113 1115 1120 1128
1131 1135 1136 1138 1139 1142 1146 1148 1149 1155 1159 1163 1165 1167 1169 1170 1175 1176 1180 1181 1184
1185 1190 1192 1201 1203 1211 1213 1215 1219 1220 1225 1226 1236 1239 1243 1246 1249 1253 1256 1257 1263
1265 1266 1267 1270 1281 1283 1287 1288 1289 1290 1291 1293 1296 1297 1302 1306 1310 1313 1315 1319 1323
1324 1325 1326 1329
"""))
